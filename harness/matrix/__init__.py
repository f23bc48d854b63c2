"""matrix"""
