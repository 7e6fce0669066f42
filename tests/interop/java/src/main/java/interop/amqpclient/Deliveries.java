package interop.amqpclient;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.DefaultConsumer;
import com.rabbitmq.client.Delivery;
import com.rabbitmq.client.Envelope;
import interop.Interop;
import interop.Rabbit;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A consumer that hands its deliveries to the scenario's thread, counting those not yet acked,
 * so that a scenario can wait for the next one with a deadline and see the prefetch bound.
 */
class Deliveries extends DefaultConsumer {
    private final BlockingQueue<Delivery> arrived = new LinkedBlockingQueue<>();
    private final AtomicInteger unacked = new AtomicInteger();
    private final AtomicInteger mostUnacked = new AtomicInteger();

    Deliveries(Channel channel) {
        super(channel);
    }

    @Override
    public void handleDelivery(String consumerTag, Envelope envelope, AMQP.BasicProperties properties, byte[] body) {
        mostUnacked.accumulateAndGet(unacked.incrementAndGet(), Math::max);
        arrived.add(new Delivery(envelope, properties, body));
    }

    /** The next delivery; fails the scenario when none comes within Interop.WAIT. */
    Delivery next(String what) throws InterruptedException {
        Delivery d = arrived.poll(Interop.WAIT.toMillis(), TimeUnit.MILLISECONDS);
        Interop.check(d != null, "no delivery within " + Interop.WAIT.toSeconds() + "s: expected " + what);
        return d;
    }

    /** The next delivery if one comes within {@code window}, else null (for "nothing more arrives"). */
    Delivery within(Duration window) throws InterruptedException {
        return arrived.poll(window.toMillis(), TimeUnit.MILLISECONDS);
    }

    void ack(Delivery d) throws IOException {
        unacked.decrementAndGet();
        getChannel().basicAck(d.getEnvelope().getDeliveryTag(), false);
    }

    void nack(Delivery d, boolean requeue) throws IOException {
        unacked.decrementAndGet();
        getChannel().basicNack(d.getEnvelope().getDeliveryTag(), false, requeue);
    }

    void reject(Delivery d, boolean requeue) throws IOException {
        unacked.decrementAndGet();
        getChannel().basicReject(d.getEnvelope().getDeliveryTag(), requeue);
    }

    /** The most deliveries this consumer held unacked at once. */
    int mostUnacked() {
        return mostUnacked.get();
    }

    static String text(Delivery d) {
        return new String(d.getBody(), StandardCharsets.UTF_8);
    }
}
