"""Consumer priorities side by side with a real RabbitMQ 3.10 (the Debian package): each scenario of
test_consumer_priorities.py runs, through pika, once on the adaptor and once on a private
RabbitMQ; who received which message must be the same on both (and what that file expects).
"""
import unittest

import cloudtest
import rabbitmq
import test_consumer_priorities as scenarios

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
        theirs = scenarios.run_on(RABBITMQ.amqp_port, scenario)
        ours = scenarios.run_on(CLOUD.amqp_port, scenario, scenarios.bus_listening(CLOUD))
        self.assertEqual(theirs, scenarios.EXPECTED[name], "RabbitMQ 3.10's")
        self.assertEqual(ours, theirs, "first: ours; second: RabbitMQ 3.10's")

    def test_a_higher_priority_first_while_it_has_room(self):
        self.same("higher_first")

    def test_b_equal_priorities_in_turn(self):
        self.same("equals_in_turn")

    def test_c_the_lower_priority_once_the_higher_one_is_gone(self):
        self.same("lower_while_higher_gone")


if __name__ == "__main__":
    unittest.main()
