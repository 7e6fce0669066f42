"""Network partitions of one nats-server node on loopback, with iptables rules in chains of the
soak's own (named after its PID), never touching anyone else's rules.

A node listens on an address of its own (127.0.0.x); what it sends is told apart by its process
group (owner match). Both are marked on the way out (OUTPUT) and dropped on the way in (INPUT),
so packets vanish as on a cut cable: no error comes back to the sender."""
import os
import re
import subprocess

MARK = "0x50a4"
PREFIX = "SOAK"


def _iptables(*args, check=True):
    return subprocess.run(["iptables", "-w", *args], capture_output=True, text=True, check=check)


def available():
    try:
        return _iptables("-S", "OUTPUT", check=False).returncode == 0
    except FileNotFoundError:
        return False


class Firewall:
    def __init__(self):
        self.out_chain = f"{PREFIX}{os.getpid()}-OUT"
        self.in_chain = f"{PREFIX}{os.getpid()}-IN"
        self.installed = False

    def install(self):
        remove_stale()
        _iptables("-N", self.out_chain)
        _iptables("-N", self.in_chain)
        self.installed = True
        _iptables("-A", self.in_chain, "-m", "mark", "--mark", MARK, "-j", "DROP")
        _iptables("-I", "OUTPUT", "1", "-j", self.out_chain)
        _iptables("-I", "INPUT", "1", "-j", self.in_chain)

    def isolate(self, host, group):
        """Everything to `host` and everything processes of `group` send is dropped."""
        _iptables("-A", self.out_chain, "-d", host, "-j", "MARK", "--set-mark", MARK)
        _iptables("-A", self.out_chain, "-m", "owner", "--gid-owner", str(group), "-j", "MARK", "--set-mark", MARK)

    def heal(self):
        _iptables("-F", self.out_chain)

    def remove(self):
        if self.installed:
            remove_chains(self.out_chain, self.in_chain)
            self.installed = False


def remove_chains(*chains):
    for chain in chains:
        parent = "OUTPUT" if chain.endswith("-OUT") else "INPUT"
        while _iptables("-D", parent, "-j", chain, check=False).returncode == 0:
            pass
        _iptables("-F", chain, check=False)
        _iptables("-X", chain, check=False)


def remove_stale():
    """Chains a soak that was SIGKILLed left behind (its PID is gone)."""
    listing = _iptables("-S", check=False).stdout
    for chain, pid in set(re.findall(rf"^-N ({PREFIX}(\d+)-(?:OUT|IN))$", listing, re.M)):
        if not os.path.exists(f"/proc/{pid}"):
            remove_chains(chain)
