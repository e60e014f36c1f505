//! Encrypts a file through the service, decrypts it back, and prints the service's metrics.
//!
//! ```text
//! cargo run --release --example offload [FILE]
//! ```
//!
//! Without a file, 16 MiB of generated data is used. The file is cut into packets, spread over
//! the AES nodes by the scheduler, and the ciphertext is checked by decrypting it again.

use std::time::Instant;

use cryptodispatch::{Job, Mode, Padding, Service};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let data = match std::env::args().nth(1) {
        Some(path) => std::fs::read(&path).map_err(|e| format!("cannot read {path}: {e}"))?,
        None => (0..16 << 20)
            .map(|i: u32| (i.wrapping_mul(2654435761) >> 24) as u8)
            .collect(),
    };
    let service = Service::new()?;
    let key = service.add_aes_key(&[0x2b; 32])?;
    let iv = [0x0f; 16];

    // Many independent jobs (here: 1 MiB each) keep every node busy; one CBC job would be
    // bound to one node, since its packets chain.
    let start = Instant::now();
    let handles = data
        .chunks(1 << 20)
        .map(|chunk| {
            service.submit(Job::encrypt(key, Mode::Cbc, &iv, chunk).with_padding(Padding::Pkcs7))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut ciphertexts = Vec::with_capacity(handles.len());
    for h in handles {
        ciphertexts.push(h.wait()?.into_data().unwrap_or_default());
    }
    let took = start.elapsed();
    println!(
        "encrypted {} bytes in {} jobs in {:.1} ms ({:.0} MB/s)",
        data.len(),
        ciphertexts.len(),
        took.as_secs_f64() * 1e3,
        data.len() as f64 / took.as_secs_f64() / 1e6
    );

    // Decrypt everything back and compare.
    let handles = ciphertexts
        .into_iter()
        .map(|ct| {
            service.submit(Job::decrypt(key, Mode::Cbc, &iv, ct).with_padding(Padding::Pkcs7))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut plain = Vec::with_capacity(data.len());
    for h in handles {
        plain.extend(h.wait()?.into_data().unwrap_or_default());
    }
    assert_eq!(plain, data, "decryption gives the original data back");
    println!("decrypted and checked\n");
    print!("{}", service.metrics());
    Ok(())
}
