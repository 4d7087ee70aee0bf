"""Capture: run a case on a device and write a trace bundle. Needs torch; ncu optional."""
