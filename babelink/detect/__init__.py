"""Mention detection: running text → candidate spans with exact character offsets."""
