//! The interop matrix's program for lapin, the Rust AMQP 0-9-1 client, on tokio
//! (tests/interop/README.md). It runs each scenario against AMQP_URL in lapin's own idiom and
//! prints one RESULT line per scenario; besides the standard seven it runs `topic_exchange`.

mod reconnect;
mod scenarios;
mod support;

use std::{future::Future, pin::Pin, process::ExitCode, time::Duration};
use support::{Outcome, S};

/// Bounds a whole scenario, so one stuck in an RPC the server never answers is reported and
/// the others still run.
const SCENARIO_LIMIT: Duration = Duration::from_secs(120);

type Run = for<'a> fn(&'a S) -> Pin<Box<dyn Future<Output = Outcome> + Send + 'a>>;

/// The order matters only for reconnect, which restarts the server and so runs last.
const SCENARIOS: [(&str, Run); 8] = [
    ("declare", |s| Box::pin(scenarios::declare(s))),
    ("publish_confirm", |s| Box::pin(scenarios::publish_confirm(s))),
    ("consume_prefetch_ack", |s| Box::pin(scenarios::consume_prefetch_ack(s))),
    ("nack_requeue", |s| Box::pin(scenarios::nack_requeue(s))),
    ("mandatory_return", |s| Box::pin(scenarios::mandatory_return(s))),
    ("basic_get", |s| Box::pin(scenarios::basic_get(s))),
    ("topic_exchange", |s| Box::pin(scenarios::topic_exchange(s))),
    ("reconnect", |s| Box::pin(reconnect::reconnect(s))),
];

#[tokio::main]
async fn main() -> ExitCode {
    let client = std::env::var("INTEROP_CLIENT").unwrap_or_else(|_| "lapin".into());
    let url = std::env::var("AMQP_URL").unwrap_or_default();
    println!("LIBRARY {client} lapin {} (crates.io)", env!("LAPIN_VERSION"));
    println!("SCENARIOS {client} topic_exchange");
    let mut failed = false;
    for (name, run) in SCENARIOS {
        let s = S::new(&client, name, &url);
        let outcome = match tokio::time::timeout(SCENARIO_LIMIT, run(&s)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!(
                "did not finish within {SCENARIO_LIMIT:?} (last step: {})",
                s.last_step()
            )),
        };
        s.close_all().await;
        match outcome {
            Ok(()) => println!("RESULT {client} {name} pass"),
            Err(reason) => {
                failed = true;
                println!("RESULT {client} {name} fail {}", one_line(&reason));
            }
        }
    }
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
