"""The soak's verdict on records made here (no load runs): a check that cannot fail proves
nothing, so each is shown failing on the record it exists to catch."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampler  # noqa: E402
import verdict  # noqa: E402
from ledger import Ledger  # noqa: E402


def samples(pid, life_s, rss_kib, grow_kib=0, every_s=5):
    """One process sampled every `every_s` for `life_s`, its RSS rising by `grow_kib` a sample in
    the last third."""
    n = int(life_s // every_s) + 1
    return [{"t": 1000.0 + i * every_s, "role": "nats-n0", "pid": pid, "fds": 40,
             "rss_kib": rss_kib + (grow_kib * (i - 2 * n // 3) if i >= 2 * n // 3 else 0)} for i in range(n)]


class Undelivered(unittest.TestCase):
    def test_a_confirmed_message_no_reader_received_is_undelivered_unless_excused_or_a_probe(self):
        ledger = Ledger()
        for message_id, queue, kind in (("m1", "q", "work"), ("m2", "q", "work"), ("m3", "c", "churn"),
                                        ("p1", None, "probe-after-unbind")):
            ledger.publishing(message_id, queue, "pub", 1, kind)
            ledger.confirm(message_id)
        ledger.delivered("m1", "q", False, "cons")
        ledger.excuse(["m3"], "in c, which expires by x-expires when left")
        self.assertEqual([m["id"] for m in verdict.undelivered(ledger)], ["m2"])
        check = verdict.confirmed_delivered(ledger)
        self.assertFalse(check["ok"])
        self.assertEqual(check["items"][0]["queue"], "q")


class Flatness(unittest.TestCase):
    def test_a_process_is_judged_only_once_it_lived_ten_minutes(self):
        young = sampler.flatness(samples(1, sampler.MIN_LIFE_S - 5, 100_000, grow_kib=5_000))
        self.assertFalse(young[0]["judged"])
        old = sampler.flatness(samples(2, sampler.MIN_LIFE_S, 100_000))
        self.assertTrue(old[0]["judged"])
        self.assertTrue(old[0]["flat"])

    def test_a_process_whose_rss_keeps_growing_fails(self):
        grown = sampler.flatness(samples(3, sampler.MIN_LIFE_S, 100_000, grow_kib=2_000))
        self.assertTrue(grown[0]["judged"])
        self.assertFalse(grown[0]["rss_kib"]["flat"])
        self.assertFalse(verdict.resources_flat(grown, 3600)["ok"])

    def test_a_long_load_that_judged_no_process_fails_and_a_short_one_says_so(self):
        young = sampler.flatness(samples(4, 300, 100_000))
        self.assertFalse(verdict.resources_flat(young, sampler.LONG_LOAD_S)["ok"])
        short = verdict.resources_flat(young, 600)
        self.assertTrue(short["ok"])
        self.assertIn(f"lived the {sampler.MIN_LIFE_S} s a judgement needs", short["summary"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
