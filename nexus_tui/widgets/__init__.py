"""How a project looks on the main screen: the widgets and the Rich text they show."""
