//! A CBC stream pushed chunk by chunk, as a tunnel or a disk encryptor would: outputs come back
//! in order, and the result equals one CBC encryption of the whole message.
//!
//! ```text
//! cargo run --release --example stream
//! ```

use cryptodispatch::crypto::AesKey;
use cryptodispatch::{AesOp, Direction, Mode, Padding, Service, TryPushError};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let service = Service::new()?;
    let key_bytes = [0x42; 16];
    let iv = [0x24; 16];
    let key = service.add_aes_key(&key_bytes)?;
    let op = AesOp::new(Direction::Encrypt, Mode::Cbc).with_padding(Padding::Pkcs7);

    let mut stream = service.stream(key, op, &iv)?;
    let mut message = Vec::new();
    let mut ciphertext = Vec::new();
    for i in 0..100u8 {
        // Every chunk but the last: whole 16-byte blocks.
        let chunk = vec![i; 4096];
        message.extend_from_slice(&chunk);
        // A stream holds a bounded number of outputs unreceived: at the bound, `try_push`
        // hands the chunk back, and receiving the oldest output makes room.
        let mut chunk = chunk;
        while let Err(refused) = stream.try_push(chunk) {
            match refused {
                TryPushError::Full(back) => {
                    if let Some(out) = stream.recv() {
                        ciphertext.extend(out?);
                    }
                    chunk = back;
                }
                other => return Err(other.into()),
            }
        }
        // Take whatever output is ready, without waiting.
        while let Some(out) = stream.try_recv() {
            ciphertext.extend(out?);
        }
    }
    // The last chunk may have any length; PKCS#7 padding is added to it.
    let tail = b"the end of the stream".to_vec();
    message.extend_from_slice(&tail);
    stream.finish(tail)?;
    while let Some(out) = stream.recv() {
        ciphertext.extend(out?);
    }

    let one_shot = AesKey::new(&key_bytes)?.one_shot(op, &iv, &message)?;
    assert_eq!(
        ciphertext, one_shot,
        "the stream equals the one-shot CBC encryption"
    );
    println!(
        "streamed {} bytes in 101 chunks; ciphertext of {} bytes equals the one-shot result",
        message.len(),
        ciphertext.len()
    );
    print!("{}", service.metrics());
    Ok(())
}
