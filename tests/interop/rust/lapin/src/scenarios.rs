//! The standard scenarios but reconnect, and `topic_exchange`, each in lapin's idiom: awaited
//! RPCs, a `PublisherConfirm` awaited per publish, a `Consumer` read as a stream, acks through
//! the delivery's acker.

use crate::support::{Context, Outcome, S, ensure, numbered, text};
use lapin::{
    BasicProperties, Channel, ErrorKind, ExchangeKind,
    message::Delivery,
    options::{
        BasicNackOptions, BasicPublishOptions, BasicQosOptions, BasicRejectOptions, ExchangeDeclareOptions,
        QueueBindOptions, QueueDeclareOptions,
    },
    types::{AMQPValue, FieldTable},
};

fn durable_exchange() -> ExchangeDeclareOptions {
    ExchangeDeclareOptions {
        durable: true,
        ..ExchangeDeclareOptions::default()
    }
}

/// Declares a durable exchange of this scenario and a queue bound to it with `key`.
async fn bound_queue(s: &S, channel: &Channel, kind: ExchangeKind, key: &str) -> Result<(String, String), String> {
    let exchange = s.named("x");
    s.at(format!("exchange.declare {exchange}"));
    channel
        .exchange_declare(
            exchange.as_str().into(),
            kind,
            durable_exchange(),
            FieldTable::default(),
        )
        .await
        .context(&format!("exchange.declare {exchange}"))?;
    let queue = s.queue(channel, "q").await?;
    channel
        .queue_bind(
            queue.as_str().into(),
            exchange.as_str().into(),
            key.into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .context(&format!("queue.bind {queue} to {exchange} with {key}"))?;
    Ok((exchange, queue))
}

/// The reply code of a channel or connection exception.
fn reply_code(error: &lapin::Error) -> Option<u16> {
    match error.kind() {
        ErrorKind::ProtocolError(amqp) => Some(amqp.get_id()),
        _ => None,
    }
}

/// declare: a durable topic exchange, a queue bound to it with a wildcard key; passive
/// re-declares succeed, a publish through the binding arrives and one it does not match does
/// not; a passive declare of a missing queue is 404 and the connection survives it.
pub async fn declare(s: &S) -> Outcome {
    let connection = s.connect().await?;
    let channel = s.channel(&connection).await?;
    let (exchange, queue) = bound_queue(s, &channel, ExchangeKind::Topic, "stock.*.eu").await?;
    let passive = ExchangeDeclareOptions {
        passive: true,
        ..durable_exchange()
    };
    channel
        .exchange_declare(
            exchange.as_str().into(),
            ExchangeKind::Topic,
            passive,
            FieldTable::default(),
        )
        .await
        .context("passive exchange.declare")?;
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::durable()
    };
    channel
        .queue_declare(queue.as_str().into(), passive, FieldTable::default())
        .await
        .context("passive queue.declare")?;

    // One channel's publishes reach a queue in order, so "stock.ibm.eu" arriving right after
    // "stock.sap.eu" shows "stock.sap.us" (published between them) was not routed to the queue.
    let publisher = s.confirm_channel(&connection).await?;
    for key in ["stock.sap.eu", "stock.sap.us", "stock.ibm.eu"] {
        s.publish_confirmed(
            &publisher,
            &exchange,
            key,
            BasicPublishOptions::default(),
            key.as_bytes(),
            BasicProperties::default(),
        )
        .await?;
    }
    let mut consumer = s.consume(&channel, &queue).await?;
    let first = s.expect(&mut consumer, "stock.sap.eu", false).await?;
    ensure!(
        first.exchange.as_str() == exchange && first.routing_key.as_str() == "stock.sap.eu",
        "the delivery names exchange {:?} key {:?}",
        first.exchange,
        first.routing_key
    );
    let second = s.expect(&mut consumer, "stock.ibm.eu", false).await?;
    s.ack(&second, true).await?;

    let missing = s.channel(&connection).await?;
    let answer = missing
        .queue_declare(s.named("missing").into(), passive, FieldTable::default())
        .await;
    ensure!(
        matches!(&answer, Err(error) if reply_code(error) == Some(404)),
        "passive declare of a missing queue: expected 404 NOT_FOUND, got {answer:?}"
    );
    let again = s.channel(&connection).await?;
    again
        .queue_declare(queue.as_str().into(), passive, FieldTable::default())
        .await
        .context("passive queue.declare on a new channel after the 404")?;
    Ok(())
}

fn rich_message(client: &str, i: i32) -> BasicProperties {
    let mut headers = FieldTable::default();
    headers.insert("seq".into(), AMQPValue::LongInt(i));
    headers.insert("origin".into(), AMQPValue::LongString(client.into()));
    BasicProperties::default()
        .with_content_type("application/json".into())
        .with_delivery_mode(2)
        .with_message_id(format!("id-{i}").into())
        .with_headers(headers)
}

fn check_rich_message(client: &str, delivery: &Delivery, i: i32) -> Outcome {
    let properties = &delivery.properties;
    ensure!(
        properties.content_type().as_ref().map(|v| v.as_str()) == Some("application/json")
            && *properties.delivery_mode() == Some(2)
            && properties.message_id().as_ref().map(|v| v.to_string()) == Some(format!("id-{i}")),
        "message {i}: content-type {:?} delivery-mode {:?} message-id {:?}",
        properties.content_type(),
        properties.delivery_mode(),
        properties.message_id()
    );
    let headers = properties
        .headers()
        .as_ref()
        .map(|h| h.inner().clone())
        .unwrap_or_default();
    ensure!(
        headers.get("seq") == Some(&AMQPValue::LongInt(i))
            && headers.get("origin") == Some(&AMQPValue::LongString(client.into())),
        "message {i}: headers {headers:?}, expected seq={i} origin={client}"
    );
    Ok(())
}

/// publish_confirm: ten persistent messages with properties, each publish's confirm awaited and
/// an ack; all consumed, in order, with their properties.
pub async fn publish_confirm(s: &S) -> Outcome {
    const N: i32 = 10;
    let connection = s.connect().await?;
    let channel = s.confirm_channel(&connection).await?;
    let queue = s.queue(&channel, "q").await?;
    for i in 1..=N {
        let body = format!(r#"{{"n":{i}}}"#);
        s.publish_confirmed(
            &channel,
            "",
            &queue,
            BasicPublishOptions::default(),
            body.as_bytes(),
            rich_message(&s.client, i),
        )
        .await?;
    }
    let mut consumer = s.consume(&s.channel(&connection).await?, &queue).await?;
    for i in 1..=N {
        let delivery = s.expect(&mut consumer, &format!(r#"{{"n":{i}}}"#), false).await?;
        check_rich_message(&s.client, &delivery, i)?;
        s.ack(&delivery, false).await?;
    }
    Ok(())
}

/// consume_prefetch_ack: with prefetch 3 and ten messages, a manual-ack consumer holding three
/// gets no fourth (a basic.get on another channel finds m4 still in the queue); acking in
/// batches with multiple=true, the consumer gets the rest once each, in order.
pub async fn consume_prefetch_ack(s: &S) -> Outcome {
    const PREFETCH: usize = 3;
    let connection = s.connect().await?;
    let channel = s.channel(&connection).await?;
    let queue = s.queue(&channel, "q").await?;
    s.publish_bodies(&connection, &queue, &numbered("m", 1, 10)).await?;
    channel
        .basic_qos(PREFETCH as u16, BasicQosOptions::default())
        .await
        .context("basic.qos")?;
    let mut consumer = s.consume(&channel, &queue).await?;
    let mut window = Vec::new();
    for body in numbered("m", 1, PREFETCH as u32) {
        window.push(s.expect(&mut consumer, &body, false).await?);
    }

    let other = s.channel(&connection).await?;
    let got = s.get(&other, &queue, false).await?;
    ensure!(
        got.as_ref().map(|m| m.delivery.data.as_slice()) == Some(b"m4".as_slice()),
        "with prefetch {PREFETCH} and {} unacked, the queue should still hold m4 for basic.get; got {:?}",
        window.len(),
        got.as_ref().map(|m| text(&m.delivery.data))
    );
    s.ack(&got.unwrap().delivery, false).await?;

    s.ack(window.last().unwrap(), true).await?;
    for batch in numbered("m", 5, 10).chunks(PREFETCH) {
        let mut last = None;
        for body in batch {
            last = Some(s.expect(&mut consumer, body, false).await?);
        }
        s.ack(&last.unwrap(), true).await?;
    }
    Ok(())
}

/// nack_requeue: a message nacked with requeue comes back redelivered with the same body, then a
/// rejected-with-requeue one likewise; one rejected without requeue is gone (the sentinel after
/// it arrives instead).
pub async fn nack_requeue(s: &S) -> Outcome {
    let connection = s.connect().await?;
    let channel = s.channel(&connection).await?;
    let queue = s.queue(&channel, "q").await?;
    channel
        .basic_qos(1, BasicQosOptions::default())
        .await
        .context("basic.qos")?;
    let mut consumer = s.consume(&channel, &queue).await?;

    s.publish_bodies(&connection, &queue, &["nack-me".into()]).await?;
    let nacked = s.expect(&mut consumer, "nack-me", false).await?;
    nacked
        .nack(BasicNackOptions {
            requeue: true,
            multiple: false,
        })
        .await
        .context("basic.nack requeue")?;
    s.ack(&s.expect(&mut consumer, "nack-me", true).await?, false).await?;

    s.publish_bodies(&connection, &queue, &["reject-me".into()]).await?;
    let rejected = s.expect(&mut consumer, "reject-me", false).await?;
    rejected
        .reject(BasicRejectOptions { requeue: true })
        .await
        .context("basic.reject requeue")?;
    s.ack(&s.expect(&mut consumer, "reject-me", true).await?, false).await?;

    s.publish_bodies(&connection, &queue, &["drop-me".into()]).await?;
    let dropped = s.expect(&mut consumer, "drop-me", false).await?;
    dropped
        .reject(BasicRejectOptions { requeue: false })
        .await
        .context("basic.reject without requeue")?;
    s.publish_bodies(&connection, &queue, &["sentinel".into()]).await?;
    s.ack(&s.expect(&mut consumer, "sentinel", false).await?, false).await
}

/// mandatory_return: under confirms, a mandatory publish nothing is bound for is acked carrying
/// its basic.return 312 NO_ROUTE with its body and properties (lapin hands the return to the
/// publish's confirm); a routable mandatory publish is acked without a return and delivered.
pub async fn mandatory_return(s: &S) -> Outcome {
    let connection = s.connect().await?;
    let channel = s.confirm_channel(&connection).await?;
    let (exchange, queue) = bound_queue(s, &channel, ExchangeKind::Direct, "bound").await?;
    let mandatory = BasicPublishOptions {
        mandatory: true,
        ..BasicPublishOptions::default()
    };

    let mut headers = FieldTable::default();
    headers.insert("k".into(), AMQPValue::LongString("v".into()));
    let properties = BasicProperties::default()
        .with_content_type("text/plain".into())
        .with_message_id("lost-1".into())
        .with_headers(headers.clone());
    let confirmation = s
        .publish_confirmed(&channel, &exchange, "nowhere", mandatory, b"lost", properties)
        .await?;
    let Some(returned) = confirmation.take_message() else {
        return Err("the unroutable mandatory publish was acked without a basic.return".into());
    };
    ensure!(
        returned.reply_code == 312 && returned.reply_text.as_str() == "NO_ROUTE",
        "return: {} {:?}, expected 312 NO_ROUTE",
        returned.reply_code,
        returned.reply_text
    );
    ensure!(
        returned.exchange.as_str() == exchange
            && returned.routing_key.as_str() == "nowhere"
            && returned.data == b"lost",
        "the return names exchange {:?} key {:?} body {:?}",
        returned.exchange,
        returned.routing_key,
        text(&returned.data)
    );
    let p = &returned.properties;
    ensure!(
        p.content_type().as_ref().map(|v| v.as_str()) == Some("text/plain")
            && p.message_id().as_ref().map(|v| v.as_str()) == Some("lost-1")
            && p.headers().as_ref() == Some(&headers),
        "the return lost the properties: content-type {:?} message-id {:?} headers {:?}",
        p.content_type(),
        p.message_id(),
        p.headers()
    );

    let confirmation = s
        .publish_confirmed(
            &channel,
            &exchange,
            "bound",
            mandatory,
            b"kept",
            BasicProperties::default(),
        )
        .await?;
    if let Some(returned) = confirmation.take_message() {
        return Err(format!(
            "a routable mandatory publish was returned: {} {:?}",
            returned.reply_code, returned.reply_text
        ));
    }
    let mut consumer = s.consume(&s.channel(&connection).await?, &queue).await?;
    s.ack(&s.expect(&mut consumer, "kept", false).await?, false).await
}

/// basic_get: get-empty on an empty queue; after two publishes a manual-ack get returns the
/// first with message-count 1, an auto-ack get the second with message-count 0; then empty.
pub async fn basic_get(s: &S) -> Outcome {
    let connection = s.connect().await?;
    let channel = s.channel(&connection).await?;
    let queue = s.queue(&channel, "q").await?;
    let empty = s.get(&channel, &queue, false).await?;
    ensure!(
        empty.is_none(),
        "a new queue: basic.get returned {:?}, expected get-empty",
        empty.map(|m| text(&m.delivery.data))
    );
    s.publish_bodies(&connection, &queue, &["g1".into(), "g2".into()])
        .await?;

    let first = s.get(&channel, &queue, false).await?;
    ensure!(
        matches!(&first, Some(m) if m.delivery.data == b"g1" && m.message_count == 1 && !m.delivery.redelivered),
        "first get: {:?} (expected g1, message-count 1, not redelivered)",
        first
            .as_ref()
            .map(|m| (text(&m.delivery.data), m.message_count, m.delivery.redelivered))
    );
    s.ack(&first.unwrap().delivery, false).await?;
    let second = s.get(&channel, &queue, true).await?;
    ensure!(
        matches!(&second, Some(m) if m.delivery.data == b"g2" && m.message_count == 0),
        "second get: {:?} (expected g2, message-count 0)",
        second.as_ref().map(|m| (text(&m.delivery.data), m.message_count))
    );
    let empty = s.get(&channel, &queue, false).await?;
    ensure!(
        empty.is_none(),
        "after both were taken: basic.get returned {:?}, expected get-empty",
        empty.map(|m| text(&m.delivery.data))
    );
    Ok(())
}

/// Bindings of the topic_exchange scenario: a queue, its binding keys, and the published keys
/// it must receive, in publish order. `#` stands last in each key: before the end it is refused
/// by design (540, the server's README).
const TOPIC_QUEUES: [(&str, &[&str], &[&str]); 5] = [
    ("one-word", &["stock.*.eu"], &["stock.sap.eu", "stock.ibm.eu"]),
    // `#` matches zero words too: "stock" itself.
    (
        "prefix",
        &["stock.#"],
        &[
            "stock.sap.eu",
            "stock.sap.us",
            "stock.ibm.eu",
            "stock",
            "stock.sap.eu.extra",
        ],
    ),
    // stock.sap.eu matches both bindings and arrives once.
    (
        "overlap",
        &["stock.*.eu", "*.sap.*"],
        &["stock.sap.eu", "stock.sap.us", "stock.ibm.eu", "bond.sap.eu"],
    ),
    // Two words or more, and one literal key.
    (
        "two-or-more",
        &["*.*.#", "audit"],
        &[
            "stock.sap.eu",
            "stock.sap.us",
            "stock.ibm.eu",
            "bond.sap.eu",
            "stock.sap.eu.extra",
            "audit",
            "other.thing",
        ],
    ),
    ("everything", &["#"], &TOPIC_KEYS),
];
const TOPIC_KEYS: [&str; 9] = [
    "stock.sap.eu",
    "stock.sap.us",
    "stock.ibm.eu",
    "stock",
    "bond.sap.eu",
    "stock.sap.eu.extra",
    "audit",
    "eu",
    "other.thing",
];

/// topic_exchange: five queues bound to a topic exchange with `*` and `#` patterns (two with two
/// bindings each); nine confirmed publishes with various keys; each queue receives exactly the
/// messages its patterns select, once each even when two of its bindings match, in order.
/// A sentinel published after them straight to each queue closes each queue's list.
pub async fn topic_exchange(s: &S) -> Outcome {
    let connection = s.connect().await?;
    let channel = s.confirm_channel(&connection).await?;
    let exchange = s.named("x");
    channel
        .exchange_declare(
            exchange.as_str().into(),
            ExchangeKind::Topic,
            durable_exchange(),
            FieldTable::default(),
        )
        .await
        .context(&format!("exchange.declare {exchange}"))?;
    for (suffix, keys, _) in TOPIC_QUEUES {
        let queue = s.queue(&channel, suffix).await?;
        for key in keys {
            channel
                .queue_bind(
                    queue.as_str().into(),
                    exchange.as_str().into(),
                    (*key).into(),
                    QueueBindOptions::default(),
                    FieldTable::default(),
                )
                .await
                .context(&format!("queue.bind {queue} with {key}"))?;
        }
    }
    for key in TOPIC_KEYS {
        s.publish_confirmed(
            &channel,
            &exchange,
            key,
            BasicPublishOptions::default(),
            key.as_bytes(),
            BasicProperties::default(),
        )
        .await?;
    }
    for (suffix, _, _) in TOPIC_QUEUES {
        s.publish_confirmed(
            &channel,
            "",
            &s.named(suffix),
            BasicPublishOptions::default(),
            b"sentinel",
            BasicProperties::default(),
        )
        .await?;
    }

    let consumer_channel = s.channel(&connection).await?;
    for (suffix, keys, expected) in TOPIC_QUEUES {
        let mut consumer = s.consume(&consumer_channel, &s.named(suffix)).await?;
        let mut got = Vec::new();
        loop {
            let delivery = s
                .next(&mut consumer, &format!("the next message of {suffix} ({keys:?})"))
                .await?;
            s.ack(&delivery, false).await?;
            if delivery.data == b"sentinel" {
                break;
            }
            ensure!(
                delivery.routing_key.as_str().as_bytes() == delivery.data && delivery.exchange.as_str() == exchange,
                "{suffix}: message {:?} arrived with exchange {:?} key {:?}",
                text(&delivery.data),
                delivery.exchange,
                delivery.routing_key
            );
            got.push(text(&delivery.data));
        }
        ensure!(
            got == expected,
            "queue bound with {keys:?} received {got:?}, expected {expected:?}"
        );
    }
    Ok(())
}
