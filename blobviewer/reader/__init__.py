"""Reading one blob: its pages, paging links, the JSON tree, colouring, selector help."""
