"""The HTML that ``nexus-tui serve`` sends: the dashboard page and its refusals.

Our own pages, not textual-serve's template: that one links a web font from a public CDN, and a
served dashboard must load nothing from outside its host (air-gapped sites; no third party
learns who is watching). Every asset the page names is served by the same server, behind the
same token. Refusal pages carry nothing of the projects served.
"""

from __future__ import annotations

import html

# The meta packet a session's app sends when its title changes (NexusApp.watch_title); the server
# relays it to the page as a websocket message of the same name.
PAGE_TITLE_META = "nexus_title"

# textual.js sizes its terminal with the 'Roboto Mono' family: the font file ships inside the
# textual-serve package and is served from here.
_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="referrer" content="no-referrer">
<title>{title}</title>
<link rel="stylesheet" href="/static/css/xterm.css">
<style>
@font-face {{
  font-family: "Roboto Mono";
  src: url("/static/fonts/RobotoMono-VariableFont_wght.ttf") format("truetype");
  font-weight: 100 900;
  font-style: normal;
}}
html, body {{ margin: 0; height: 100%; background: #0c181f; color: #e8eef2;
  font-family: "Roboto Mono", monospace; }}
.textual-terminal {{ position: absolute; inset: 0; opacity: 0; }}
body.-first-byte .textual-terminal {{ opacity: 1; }}
.notice {{ position: absolute; inset: 0; display: flex; align-items: center; justify-content: center;
  z-index: 10; }}
.notice > div {{ background: #12232d; padding: 2em 3em; max-width: 40em; text-align: center; }}
body.-first-byte .starting, .ended {{ display: none; }}
body.-closed .ended {{ display: flex; }}
body.-closed .starting {{ display: none; }}
</style>
<script nonce="{nonce}">
// The websocket follows the page's own scheme and host, so the page works unchanged behind a
// TLS reverse proxy and through an SSH tunnel on any local port.
document.addEventListener("DOMContentLoaded", function () {{
  var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
  document.getElementById("terminal").dataset.sessionWebsocketUrl = scheme + window.location.host + "/ws";
}});
// Once the cookie works (a request without the token is let in), the token leaves the address
// bar: history, bookmarks and a screen share no longer show it. Reloading still works.
(function () {{
  var address = new URL(window.location.href);
  if (!address.searchParams.has("token")) {{
    return;
  }}
  fetch("/session", {{ credentials: "same-origin", cache: "no-store" }}).then(function (answer) {{
    if (answer.status === 204) {{
      address.searchParams.delete("token");
      window.history.replaceState(window.history.state, "", address.pathname + address.search + address.hash);
    }}
  }});
}})();
</script>
<script nonce="{nonce}">
// The dashboard's title (with its needs count) arrives on the session's websocket as
// ["{title_meta}", TEXT], a message textual.js ignores; the page's title follows it, so a browser
// tab in the background shows when something needs a person.
(function () {{
  var NativeWebSocket = window.WebSocket;
  function Session(url, protocols) {{
    var socket = protocols === undefined ? new NativeWebSocket(url) : new NativeWebSocket(url, protocols);
    socket.addEventListener("message", function (event) {{
      if (typeof event.data !== "string") {{
        return;
      }}
      var message;
      try {{
        message = JSON.parse(event.data);
      }} catch (error) {{
        return;
      }}
      if (Array.isArray(message) && message[0] === "{title_meta}" && typeof message[1] === "string") {{
        document.title = message[1] + " \u00b7 {mode}";
      }}
    }});
    return socket;
  }}
  Session.prototype = NativeWebSocket.prototype;
  window.WebSocket = Session;
}})();
</script>
<script src="/static/js/textual.js"></script>
</head>
<body>
<div class="notice starting"><div>Starting the nexus dashboard ({mode})…</div></div>
<div class="notice ended"><div><p>This dashboard session has ended.</p>
<p>Reload the page to start a new one.</p></div></div>
<div id="terminal" class="textual-terminal" data-session-websocket-url="" data-font-size="{font_size}"></div>
</body>
</html>
"""

_MESSAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="referrer" content="no-referrer">
<title>{title}</title>
<style>
body {{ margin: 0; min-height: 100vh; display: flex; align-items: center; justify-content: center;
  background: #0c181f; color: #e8eef2; font-family: monospace; }}
main {{ background: #12232d; padding: 2em 3em; max-width: 40em; }}
</style>
</head>
<body><main><h1>{title}</h1>{body}</main></body>
</html>
"""


def dashboard_page(*, nonce: str, read_only: bool, font_size: int) -> str:
    mode = "read-only" if read_only else "actions enabled"
    return _PAGE.format(
        title=html.escape(f"nexus dashboard ({mode})"),
        nonce=nonce,
        mode=mode,
        font_size=font_size,
        title_meta=PAGE_TITLE_META,
    )


def message_page(title: str, *paragraphs: str) -> str:
    body = "".join(f"<p>{html.escape(paragraph)}</p>" for paragraph in paragraphs)
    return _MESSAGE.format(title=html.escape(title), body=body)


UNKNOWN_HOST_PAGE = message_page(
    "Unknown host name",
    "This server answers only to loopback names (localhost, 127.0.0.1, [::1]), the address it listens "
    "on and the names given with nexus-tui serve --public-host NAME.",
)

REFUSED_PAGE = message_page(
    "Access token required",
    "This address needs the access token that nexus-tui serve printed when it started "
    "(the whole URL, with ?token=...).",
)


def busy_page(max_sessions: int) -> str:
    return message_page(
        "All dashboard sessions are in use",
        f"This server allows {max_sessions} browser session(s) at once, and all are open.",
        "Close a tab that shows this dashboard and reload, or ask whoever started the server to raise --max-sessions.",
    )
