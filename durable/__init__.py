"""Durable file writes shared by every part: the bottom layer, importing nothing of ours."""
