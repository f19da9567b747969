"""``python scripts/testbed up|down``: the multi-host test bed (see bed.py);
``partition HOST`` / ``heal HOST`` cut one host off the bed's network and plug it back."""

import sys

import bed

USAGE = "usage: python scripts/testbed up|down|partition HOST|heal HOST"

if __name__ == "__main__":
    commands = {"up": bed.up, "down": bed.down}
    per_host = {"partition": bed.partition, "heal": bed.heal}
    if len(sys.argv) == 2 and sys.argv[1] in commands:
        sys.exit(commands[sys.argv[1]]())
    if len(sys.argv) == 3 and sys.argv[1] in per_host:
        sys.exit(per_host[sys.argv[1]](sys.argv[2]))
    print(USAGE, file=sys.stderr)
    sys.exit(2)
