"""Reading results, and the searches that launch probes through the pipeline: where outcomes change along a
version axis, two runs compared, bisection over releases, commits and dates, narrowing, `expect` rules from
measurement, the compatibility grid, audit and OSV.
"""
