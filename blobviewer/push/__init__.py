"""`blobviewer push`: sending recordings to a team server from any machine (docs/push.md)."""
