"""The controllers' machinery and seams: the client protocol and its errors, informers, the work
queue, the controller loop, leader election, status and condition writes, event recording. It
knows no controller."""
