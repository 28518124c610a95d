# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""python -m stepwatch: which binding this installation uses, in one line.

    stepwatch 0.1.0: binding native (.../stepwatch/_native.cpython-311-x86_64-linux-gnu.so)
    stepwatch 0.1.0: binding ctypes (/usr/lib/x86_64-linux-gnu/libstepwatch.so.1)

With no binding at all, `import stepwatch` fails first, and Python prints its message (what was
tried and how to fix it) in one line, with exit status 1.
"""

import stepwatch


def main():
    if stepwatch.BINDING == "native":
        where = stepwatch._b.__file__
    else:
        where = stepwatch._b.LIBRARY_PATH
    print(f"stepwatch {stepwatch.__version__}: binding {stepwatch.BINDING} ({where})")


if __name__ == "__main__":
    main()
