//! What every scenario shares: its names, its connections (closed when it ends, whatever
//! happens), the step it is at (named in a timeout's reason), and the waits and checks that turn
//! a missing or wrong event into a failure.

use futures_lite::StreamExt;
use lapin::{
    BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, Consumer,
    message::{BasicGetMessage, Delivery},
    options::{
        BasicAckOptions, BasicConsumeOptions, BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions,
        QueueDeclareOptions,
    },
    types::FieldTable,
};
use std::{
    future::Future,
    sync::{Arc, Mutex},
    time::Duration,
};

/// A scenario's verdict: Ok, or why it failed.
pub type Outcome = Result<(), String>;

/// Bounds every wait for an event (a delivery, a confirm, a reconnect): a sanitized server is
/// slow, and a missing event must become a failure, not a hang.
pub const WAIT_LIMIT: Duration = Duration::from_secs(30);

/// `ensure!(condition, "why it failed {}", ...)`: returns the failure from the scenario.
macro_rules! ensure {
    ($ok:expr, $($reason:tt)+) => {
        if !$ok {
            return Err(format!($($reason)+));
        }
    };
}
pub(crate) use ensure;

/// Names the operation a lapin error came from.
pub trait Context<T> {
    fn context(self, what: &str) -> Result<T, String>;
}

impl<T> Context<T> for lapin::Result<T> {
    fn context(self, what: &str) -> Result<T, String> {
        self.map_err(|error| format!("{what}: {error}"))
    }
}

/// One scenario's run.
pub struct S {
    pub client: String,
    name: String,
    url: String,
    connections: Mutex<Vec<Arc<Connection>>>,
    step: Mutex<String>,
}

impl S {
    pub fn new(client: &str, name: &str, url: &str) -> Self {
        Self {
            client: client.into(),
            name: name.into(),
            url: url.into(),
            connections: Mutex::default(),
            step: Mutex::default(),
        }
    }

    /// Records the step the scenario is at, for a timeout's reason.
    pub fn at(&self, step: impl Into<String>) {
        *self.step.lock().unwrap() = step.into();
    }

    pub fn last_step(&self) -> String {
        self.step.lock().unwrap().clone()
    }

    /// An exchange or queue name of this scenario: one subject word that begins with the
    /// client's name, as the contract asks.
    pub fn named(&self, suffix: &str) -> String {
        format!("{}-{}-{suffix}", self.client, self.name)
    }

    pub async fn connect(&self) -> Result<Arc<Connection>, String> {
        self.connect_with(ConnectionProperties::default()).await
    }

    pub async fn connect_with(&self, properties: ConnectionProperties) -> Result<Arc<Connection>, String> {
        self.at("connect");
        let connection = Connection::connect(&self.url, properties)
            .await
            .context(&format!("connect to {}", self.url))?;
        let connection = Arc::new(connection);
        self.connections.lock().unwrap().push(connection.clone());
        Ok(connection)
    }

    /// Closes what the scenario opened; a connection the server already closed is left alone.
    pub async fn close_all(&self) {
        let connections = std::mem::take(&mut *self.connections.lock().unwrap());
        for connection in connections {
            if connection.status().connected() {
                let _ = tokio::time::timeout(WAIT_LIMIT, connection.close(200, "OK".into())).await;
            }
        }
    }

    pub async fn channel(&self, connection: &Connection) -> Result<Channel, String> {
        connection.create_channel().await.context("channel.open")
    }

    pub async fn confirm_channel(&self, connection: &Connection) -> Result<Channel, String> {
        let channel = self.channel(connection).await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .context("confirm.select")?;
        Ok(channel)
    }

    /// Declares a durable queue of this scenario and checks the declare-ok names it.
    pub async fn queue(&self, channel: &Channel, suffix: &str) -> Result<String, String> {
        let name = self.named(suffix);
        self.durable_queue(channel, &name).await?;
        Ok(name)
    }

    pub async fn durable_queue(&self, channel: &Channel, name: &str) -> Result<(), String> {
        self.at(format!("queue.declare {name}"));
        let queue = channel
            .queue_declare(name.into(), QueueDeclareOptions::durable(), FieldTable::default())
            .await
            .context(&format!("queue.declare {name}"))?;
        ensure!(
            queue.name().as_str() == name,
            "queue.declare-ok names {:?}, declared {name:?}",
            queue.name()
        );
        Ok(())
    }

    /// Publishes on a confirm-mode channel and awaits the broker's confirm, which must be an ack.
    /// Returns it, for the basic.return a mandatory publish may carry.
    pub async fn publish_confirmed(
        &self,
        channel: &Channel,
        exchange: &str,
        key: &str,
        options: BasicPublishOptions,
        body: &[u8],
        properties: BasicProperties,
    ) -> Result<Confirmation, String> {
        let what = format!(
            "publish {:?} to {exchange:?} with key {key:?}",
            String::from_utf8_lossy(body)
        );
        self.at(&what);
        let confirm = channel
            .basic_publish(exchange.into(), key.into(), options, body, properties)
            .await
            .context(&what)?;
        let confirmation = within(&format!("the confirm of {what}"), confirm)
            .await?
            .context(&what)?;
        ensure!(
            confirmation.is_ack(),
            "{what}: the broker answered {confirmation:?}, expected basic.ack"
        );
        Ok(confirmation)
    }

    /// Publishes persistent messages with these bodies to a queue, each confirmed.
    pub async fn publish_bodies(&self, connection: &Connection, queue: &str, bodies: &[String]) -> Outcome {
        let channel = self.confirm_channel(connection).await?;
        for body in bodies {
            let persistent = BasicProperties::default().with_delivery_mode(2);
            self.publish_confirmed(
                &channel,
                "",
                queue,
                BasicPublishOptions::default(),
                body.as_bytes(),
                persistent,
            )
            .await?;
        }
        channel.close(200, "OK".into()).await.context("channel.close")
    }

    pub async fn consume(&self, channel: &Channel, queue: &str) -> Result<Consumer, String> {
        self.at(format!("basic.consume {queue}"));
        channel
            .basic_consume(
                queue.into(),
                "".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .context(&format!("basic.consume {queue}"))
    }

    /// Waits for the consumer's next delivery.
    pub async fn next(&self, consumer: &mut Consumer, what: &str) -> Result<Delivery, String> {
        self.at(format!("waiting for {what}"));
        match within(&format!("waiting for {what}"), consumer.next()).await? {
            Some(delivery) => delivery.context(&format!("waiting for {what}")),
            None => Err(format!("waiting for {what}: the consumer ended")),
        }
    }

    /// Waits for the next delivery and checks its body and redelivered flag.
    pub async fn expect(&self, consumer: &mut Consumer, body: &str, redelivered: bool) -> Result<Delivery, String> {
        let delivery = self.next(consumer, &format!("{body:?}")).await?;
        ensure!(
            delivery.data == body.as_bytes() && delivery.redelivered == redelivered,
            "expected {body:?} redelivered={redelivered}, got {:?} redelivered={}",
            text(&delivery.data),
            delivery.redelivered
        );
        Ok(delivery)
    }

    pub async fn ack(&self, delivery: &Delivery, multiple: bool) -> Outcome {
        delivery
            .ack(BasicAckOptions { multiple })
            .await
            .map(drop)
            .context(&format!("basic.ack {} multiple={multiple}", delivery.delivery_tag))
    }

    pub async fn get(&self, channel: &Channel, queue: &str, no_ack: bool) -> Result<Option<BasicGetMessage>, String> {
        self.at(format!("basic.get {queue}"));
        channel
            .basic_get(queue.into(), BasicGetOptions { no_ack })
            .await
            .context(&format!("basic.get {queue}"))
    }
}

/// Awaits `future` for at most WAIT_LIMIT.
pub async fn within<T>(what: &str, future: impl Future<Output = T>) -> Result<T, String> {
    tokio::time::timeout(WAIT_LIMIT, future)
        .await
        .map_err(|_| format!("{what}: nothing within {WAIT_LIMIT:?}"))
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn numbered(prefix: &str, from: u32, to: u32) -> Vec<String> {
    (from..=to).map(|i| format!("{prefix}{i}")).collect()
}
