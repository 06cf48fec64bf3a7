#!/usr/bin/python3
"""Prints the test cases unittest's own loader finds in a test script, one Class.test_name per
line, for tests/tools/CMakeLists.txt to register each as a ctest entry. A script that does not
import is an error here, at configure time, with unittest's reason.

    list_tests.py SCRIPT.py
"""
import os
import sys
import unittest


def cases(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from cases(t)
        else:
            yield t


def main(path):
    folder, name = os.path.split(os.path.abspath(path))
    sys.path.insert(0, folder)
    loader = unittest.TestLoader()
    suite = loader.loadTestsFromName(os.path.splitext(name)[0])
    if loader.errors:
        sys.stderr.write("".join(loader.errors))
        return 1
    for t in cases(suite):
        print(f"{type(t).__name__}.{t._testMethodName}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
