"""What stado's reading and repairing commands show and do, called by the CLI (stado.cli) and the dashboard
(stado.ui): overview (`stado status`), render (text and JSON views), watch (`stado job watch`), logs, doctor,
repair, and batch (flags and batch files turned into submissions).
"""
