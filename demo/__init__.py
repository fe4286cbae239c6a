"""``make demo``: the whole flow on one machine (see ``demo.__main__``)."""
