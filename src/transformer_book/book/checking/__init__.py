"""Checking results: committed records, the drift check, calibration, the claim index and the build's reports."""
