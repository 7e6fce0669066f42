//! reconnect, through lapin's own recovery (`ConnectionProperties::enable_auto_recover`): the
//! connection reconnects by itself after the server's restart and replays its channels (with
//! their confirm mode), and a caller whose operation failed meanwhile waits for that with
//! `Channel::wait_for_recovery`, as lapin's docs show.

use crate::support::{Context, Outcome, S, ensure, within};
use futures_lite::StreamExt;
use lapin::{
    BasicProperties, Channel, ConnectionProperties, Consumer, Event,
    options::{BasicConsumeOptions, BasicPublishOptions},
    types::FieldTable,
};

/// A confirmed persistent message survives a server restart; lapin reconnects by itself (a
/// `Connected` event follows the restart), and on the same channel, recovered, `before` is
/// delivered; then `after` is published with a confirm on it and consumed.
pub async fn reconnect(s: &S) -> Outcome {
    let connection = s
        .connect_with(ConnectionProperties::default().enable_auto_recover())
        .await?;
    let mut events = connection.events_listener();
    let channel = s.confirm_channel(&connection).await?;
    let queue = format!("{}-reconnect", s.client);
    s.durable_queue(&channel, &queue).await?;
    let persistent = BasicProperties::default().with_delivery_mode(2);
    s.publish_confirmed(
        &channel,
        "",
        &queue,
        BasicPublishOptions::default(),
        b"before",
        persistent.clone(),
    )
    .await?;

    s.at("CLOUD_RESTART_CMD");
    restart_server().await?;
    s.at("waiting for lapin to reconnect");
    loop {
        match within("waiting for lapin's Connected event after the restart", events.next()).await? {
            Some(Event::Connected) => break,
            Some(other) => eprintln!("connection event while recovering: {other:?}"),
            None => return Err("the connection's event stream ended during the restart".into()),
        }
    }

    let mut consumer = consume_recovered(s, &channel, &queue).await?;
    s.ack(&s.expect(&mut consumer, "before", false).await?, false).await?;
    s.publish_confirmed(
        &channel,
        "",
        &queue,
        BasicPublishOptions::default(),
        b"after",
        persistent,
    )
    .await?;
    s.ack(&s.expect(&mut consumer, "after", false).await?, false).await?;
    ensure!(
        connection.status().connected(),
        "the connection is not connected after the scenario: {:?}",
        connection.status()
    );
    Ok(())
}

/// basic.consume on a channel lapin may still be replaying: a failure it can recover from is
/// waited out with `wait_for_recovery`, then the consume is tried again.
async fn consume_recovered(s: &S, channel: &Channel, queue: &str) -> Result<Consumer, String> {
    s.at(format!("basic.consume {queue} after the restart"));
    for _ in 0..3 {
        let attempt = channel
            .basic_consume(
                queue.into(),
                "".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await;
        match attempt {
            Ok(consumer) => return Ok(consumer),
            Err(error) => {
                eprintln!("basic.consume after the restart: {error}; waiting for lapin's recovery");
                within("wait_for_recovery", channel.wait_for_recovery(error))
                    .await?
                    .context("wait_for_recovery")?;
            }
        }
    }
    Err(format!("basic.consume {queue} failed after three recoveries"))
}

/// Runs CLOUD_RESTART_CMD without blocking the runtime lapin's connection lives on.
async fn restart_server() -> Outcome {
    let command = std::env::var("CLOUD_RESTART_CMD").map_err(|_| "CLOUD_RESTART_CMD is not set".to_string())?;
    let output = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&command)
        .output()
        .await
        .map_err(|error| format!("CLOUD_RESTART_CMD: {error}"))?;
    ensure!(
        output.status.success(),
        "CLOUD_RESTART_CMD: {}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}
