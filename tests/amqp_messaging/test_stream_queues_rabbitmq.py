"""Stream queues side by side with a real RabbitMQ 3.10 (the Debian package): each scenario of
test_stream_queues.py runs, through pika, once on the adaptor and once on a private RabbitMQ; the
observations (refusal codes and texts, what each offset reads, two readers, credit, how a delivery
shows its publish) must be equal, and equal to what that file expects. One difference is kept
apart: an x-stream-offset RabbitMQ cannot read crashes its channel (541), where the adaptor answers
406 naming the argument.
"""
import unittest

import cloudtest
import rabbitmq
import test_stream_queues as scenarios

CLOUD = None
RABBITMQ = None


def setUpModule():
    global CLOUD, RABBITMQ
    CLOUD = unittest.enterModuleContext(cloudtest.Cloud())
    RABBITMQ = unittest.enterModuleContext(rabbitmq.RabbitMQ())


class SameAsRabbitMQ(unittest.TestCase):
    maxDiff = None

    def same(self, name):
        scenario = scenarios.SCENARIOS[name]
        raw_theirs = scenarios.run_on(RABBITMQ.amqp_port, scenario)
        raw_ours = scenarios.run_on(CLOUD.amqp_port, scenario)
        theirs = scenarios.normalized(name, raw_theirs)
        ours = scenarios.normalized(name, raw_ours)
        self.assertEqual(theirs, scenarios.EXPECTED[name], "RabbitMQ 3.10's")
        self.assertEqual(ours, theirs, "first: ours; second: RabbitMQ 3.10's")
        return raw_theirs, raw_ours

    def test_a_refusals(self):
        self.same("refusals")

    def test_b_offsets(self):
        theirs, ours = self.same("offsets")
        self.assertEqual(theirs["bad offset"], 541)  # RabbitMQ 3.10 crashes on it
        self.assertEqual(ours["bad offset"], 406)

    def test_c_two_readers(self):
        self.same("two_readers")

    def test_d_credit(self):
        self.same("credit")

    def test_e_routed(self):
        self.same("routed")


if __name__ == "__main__":
    unittest.main()
