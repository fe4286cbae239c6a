"""Time for everything that schedules: an injectable clock and Go-style durations."""
