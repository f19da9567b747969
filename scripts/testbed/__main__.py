"""``python scripts/testbed up|down``: the multi-host test bed (see bed.py)."""

import sys

import bed

USAGE = "usage: python scripts/testbed up|down"

if __name__ == "__main__":
    commands = {"up": bed.up, "down": bed.down}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        print(USAGE, file=sys.stderr)
        sys.exit(2)
    sys.exit(commands[sys.argv[1]]())
