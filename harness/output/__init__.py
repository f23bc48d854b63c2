"""Showing them: terminal tables and JSON, the matrix report (table, Markdown, HTML, JSON), the compatibility
table, live progress, the nightly workflow's steps and job matrix, and the pages' generated parts.
"""
