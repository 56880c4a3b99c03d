"""`jobman ui`: the dashboard. Imported only by that command (jobman.cli.extras.cmd_ui); it reads through
jobman.ui.reads, jobman.commands.showing and jobman.commands.api, and changes jobs through the very calls the commands make."""
