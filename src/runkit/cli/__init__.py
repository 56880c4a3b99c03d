"""What both command lines share: argparse whose every error is one line (cliargs), options declared once as a
table and read fast (fastargs), and the one way a command ends (climain)."""
