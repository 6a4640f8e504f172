"""Two runs side by side: their steps matched by key and aligned, their outputs diffed."""
