"""runkit's layer over the operating system: every platform call of both tools is made in proc.py or filelocks.py
(docs/porting.md), and the durable writes, capped logs, process finding and fault points built on them."""
