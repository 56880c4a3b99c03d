"""`stado ui`: the dashboard. Imported only by that command (stado.cli.fleet.cmd_ui); it reads through
stado.ui.reads (overview's listings, lookup, the claim-order index) and changes jobs through the very calls the
commands make (jobs.cancel, submission.rerun, pause.pause and pause.resume)."""
