package interop.spring;

import static interop.Interop.check;
import static interop.Interop.expect;
import static interop.spring.Listening.text;

import interop.Interop;
import interop.Interop.Verdict;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.springframework.amqp.core.AnonymousQueue;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageDeliveryMode;
import org.springframework.amqp.core.MessageListener;
import org.springframework.amqp.rabbit.connection.CorrelationData;
import org.springframework.amqp.rabbit.listener.AsyncConsumerRestartedEvent;
import org.springframework.amqp.rabbit.listener.ListenerContainerConsumerFailedEvent;

/**
 * The reconnect scenario with Spring's own recovery: after the server restart the listener
 * container restarts its consumer (announcing it with an AsyncConsumerRestartedEvent), the
 * RabbitAdmin declares the topology again on the new connection (the anonymous queue included),
 * and the template's next call opens a new connection by itself.
 */
final class Reconnect {
    private final Spring spring;

    Reconnect(Spring spring) {
        this.spring = spring;
    }

    Verdict run() throws Exception {
        String exchange = spring.names.reconnectExchange(), durable = spring.names.reconnectQueue();
        AnonymousQueue live = spring.context.getBean("reconnectLiveQueue", AnonymousQueue.class);
        Listening.Inbox<Message> inbox = new Listening.Inbox<>();
        CountDownLatch restarted = new CountDownLatch(1);
        AtomicReference<String> lastFailure = new AtomicReference<>("none");
        MessageListener listener = inbox::add;
        try (Listening listening = Listening.start(spring.connectionFactory, live.getName(), listener, c -> {
                c.setAmqpAdmin(spring.admin);
                c.setRecoveryInterval(250);
                c.setApplicationEventPublisher(event -> {
                    if (event instanceof AsyncConsumerRestartedEvent) {
                        restarted.countDown();
                    } else if (event instanceof ListenerContainerConsumerFailedEvent failed) {
                        lastFailure.set(failed.getReason() + ": " + failed.getThrowable());
                    }
                });
            })) {
            publishConfirmed(exchange, "before");
            expect("before", text(inbox.next("`before` on the live listener")), "live listener's first message");

            Interop.restartServer();
            check(restarted.await(Interop.WAIT.toMillis(), TimeUnit.MILLISECONDS),
                  "the container did not restart its consumer within " + Interop.WAIT.toSeconds()
                  + "s of the restart (last consumer failure: " + lastFailure.get() + ")");

            Message kept = spring.template.receive(durable, Interop.WAIT.toMillis());
            check(kept != null, "`before` was not in " + durable + " after the restart");
            expect("before", text(kept), "body kept across the restart");

            publishConfirmed(exchange, "after");
            expect("after", text(inbox.next("`after` on the listener started before the restart")), "restarted listener's message");
            Message afterStored = spring.template.receive(durable, Interop.WAIT.toMillis());
            check(afterStored != null, "`after` did not arrive in " + durable);
            expect("after", text(afterStored), "body published after the restart");
        }
        return Verdict.pass();
    }

    private void publishConfirmed(String exchange, String body) throws Exception {
        CorrelationData correlation = new CorrelationData("reconnect-" + body);
        spring.template.convertAndSend(exchange, "", body, m -> {
            m.getMessageProperties().setDeliveryMode(MessageDeliveryMode.PERSISTENT);
            return m;
        }, correlation);
        Spring.expectAck(correlation);
    }
}
