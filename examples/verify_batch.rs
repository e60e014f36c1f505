//! Signs messages through the service, then verifies them back one by one and as a batch.
//!
//! ```text
//! cargo run --release --example verify_batch
//! ```
//!
//! A batch job is cut into packets of up to 64 signatures that the Ed25519 nodes share; each
//! packet is checked with one batch verification, and a failing batch is split until the bad
//! signatures are found. The answers are the same as one-by-one verification.

use cryptodispatch::{Job, Service};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let service = Service::new()?;
    let signer = service.generate_signing_key()?;
    let public = service.add_verifying_key(&service.verifying_key(signer)?)?;

    let messages: Vec<Vec<u8>> = (0..1000u32)
        .map(|i| format!("message {i}").into_bytes())
        .collect();
    let handles = messages
        .iter()
        .map(|m| service.submit(Job::sign(signer, m.clone())))
        .collect::<Result<Vec<_>, _>>()?;
    let mut signatures = Vec::with_capacity(handles.len());
    for h in handles {
        signatures.push(h.wait()?.signature().unwrap_or([0; 64]));
    }
    // Spoil one signature.
    signatures[123][5] ^= 1;

    let batch = Job::verify_batch(
        messages
            .iter()
            .zip(&signatures)
            .map(|(m, s)| (public, m.clone(), s.to_vec())),
    );
    let answers = service
        .submit(batch)?
        .wait()?
        .verified_batch()
        .unwrap_or_default();
    let bad: Vec<usize> = answers
        .iter()
        .enumerate()
        .filter(|(_, ok)| !**ok)
        .map(|(i, _)| i)
        .collect();
    println!(
        "{} signatures verified as a batch; bad: {bad:?}",
        answers.len()
    );
    assert_eq!(bad, vec![123]);

    // One by one gives the same answers.
    for (i, (m, s)) in messages.iter().zip(&signatures).enumerate().step_by(97) {
        let one = service
            .submit(Job::verify(public, m.clone(), s))?
            .wait()?
            .verified();
        assert_eq!(one, Some(answers[i]));
    }
    print!("{}", service.metrics());
    Ok(())
}
