package interop.amqpclient;

import static interop.Interop.check;
import static interop.Interop.expect;
import static interop.amqpclient.StandardScenarios.bytes;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.Delivery;
import com.rabbitmq.client.MessageProperties;
import com.rabbitmq.client.Recoverable;
import com.rabbitmq.client.RecoveryListener;
import interop.Interop;
import interop.Interop.Verdict;
import interop.Rabbit;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * The reconnect scenario with the client's automatic connection recovery: across a server
 * restart the connection, its channels, its consumer and its server-named queue (re-declared and
 * re-bound by topology recovery) come back without the program reopening anything.
 */
final class Reconnect {
    private final Rabbit rabbit;

    Reconnect(Rabbit rabbit) {
        this.rabbit = rabbit;
    }

    Verdict run() throws Exception {
        String exchange = rabbit.name("reconnect-ex"), durable = rabbit.name("reconnect");
        ConnectionFactory factory = rabbit.factory();
        factory.setAutomaticRecoveryEnabled(true); // the default since 4.0, said for the reader
        factory.setTopologyRecoveryEnabled(true);
        factory.setNetworkRecoveryInterval(250);
        try (Connection connection = factory.newConnection(rabbit.name("reconnect"))) {
            CountDownLatch recovered = new CountDownLatch(1);
            ((Recoverable) connection).addRecoveryListener(new RecoveryListener() {
                @Override
                public void handleRecovery(Recoverable recoverable) {
                    recovered.countDown();
                }

                @Override
                public void handleRecoveryStarted(Recoverable recoverable) {
                }
            });
            Channel channel = connection.createChannel();
            channel.exchangeDeclare(exchange, "fanout", true);
            channel.queueDeclare(durable, true, false, false, null);
            channel.queueBind(durable, exchange, "");
            // The live consumer: a server-named, exclusive, auto-delete queue on the same exchange.
            String live = channel.queueDeclare().getQueue();
            channel.queueBind(live, exchange, "");
            Deliveries listener = new Deliveries(channel);
            channel.basicConsume(live, false, listener);

            channel.confirmSelect();
            channel.basicPublish(exchange, "", MessageProperties.PERSISTENT_TEXT_PLAIN, bytes("before"));
            channel.waitForConfirmsOrDie(Interop.WAIT.toMillis());
            Delivery early = listener.next("`before` on the live consumer");
            expect("before", Deliveries.text(early), "live consumer's first message");
            listener.ack(early);

            Interop.restartServer();
            check(recovered.await(Interop.WAIT.toMillis(), TimeUnit.MILLISECONDS),
                  "automatic recovery did not complete within " + Interop.WAIT.toSeconds() + "s of the restart");
            check(connection.isOpen() && channel.isOpen(), "the recovered connection or channel is not open");

            // The durable queue kept `before` across the restart; a new consumer on the recovered channel gets it.
            Deliveries stored = new Deliveries(channel);
            channel.basicConsume(durable, false, stored);
            Delivery kept = stored.next("`before` from " + durable + " after the restart");
            expect("before", Deliveries.text(kept), "body kept across the restart");
            stored.ack(kept);

            channel.basicPublish(exchange, "", MessageProperties.PERSISTENT_TEXT_PLAIN, bytes("after"));
            channel.waitForConfirmsOrDie(Interop.WAIT.toMillis());
            Delivery later = listener.next("`after` on the consumer registered before the restart");
            expect("after", Deliveries.text(later), "recovered consumer's message");
            listener.ack(later);
            Delivery afterStored = stored.next("`after` in " + durable);
            expect("after", Deliveries.text(afterStored), "body published after the restart");
            stored.ack(afterStored);
        }
        return Verdict.pass();
    }
}
