"""The harness's own contract: it finds the host's ports, and leaves nothing behind."""
import os
import unittest

import cloudtest


class HarnessTest(unittest.TestCase):
    def test_boot_reports_ports_and_stop_leaves_nothing(self):
        cloud = cloudtest.Cloud()
        with cloud:
            self.assertIsNotNone(cloud.http_port)
            self.assertTrue(cloud.pubsub_url.startswith("nats://127.0.0.1:"), cloud.log)
            self.assertEqual(len(cloud.nats_children()), 1, cloud.log)
        self.assertEqual(cloud.proc.returncode, 0, cloud.log)
        self.assertFalse(os.path.exists(cloud.tmp))

    def test_available_manifest_keeps_only_built_rows(self):
        cloud = cloudtest.Cloud(wait=False)
        try:
            self.assertEqual(cloud.rows[0], "pubsub")
            for name in cloud.rows:
                row = next(r for r in cloudtest.manifest_rows() if r["name"] == name)
                self.assertTrue(cloudtest.have_plugin(row["library"]))
        finally:
            cloud.cleanup()


if __name__ == "__main__":
    unittest.main(verbosity=2)
