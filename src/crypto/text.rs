//! A packet's text, run in place or from one buffer into another: what the GCM chains take, so
//! that a node can keep a packet's input as it was to run it again (docs/ALGORITHM.md §15.2,
//! "Out of place").

use cipher::InOutBuf;

use crate::crypto::error::CryptoError;

/// A packet's text as a GCM packet call takes it: run in place, or read from one buffer and
/// written into another of the same length, which leaves the input as it was (the node keeps
/// it to run the packet again should it fail, rather than a copy made before the run).
pub(crate) struct Text<'i, 'o>(Ends<'i, 'o>);

enum Ends<'i, 'o> {
    InPlace(&'o mut [u8]),
    /// Of the same length.
    Between {
        input: &'i [u8],
        output: &'o mut [u8],
    },
}

impl<'i, 'o> Text<'i, 'o> {
    /// `buf`, run in place.
    pub(crate) fn in_place(buf: &'o mut [u8]) -> Self {
        Text(Ends::InPlace(buf))
    }

    /// `input`, run into `output`.
    ///
    /// # Errors
    /// [`CryptoError::LengthExceedsBuffer`] unless they are the same length.
    pub(crate) fn between(input: &'i [u8], output: &'o mut [u8]) -> Result<Self, CryptoError> {
        check_same_len(input, output)?;
        Ok(Text(Ends::Between { input, output }))
    }

    pub(super) fn len(&self) -> usize {
        match &self.0 {
            Ends::InPlace(buf) => buf.len(),
            Ends::Between { input, .. } => input.len(),
        }
    }

    /// The text before the call has run it.
    pub(super) fn input(&self) -> &[u8] {
        match &self.0 {
            Ends::InPlace(buf) => buf,
            Ends::Between { input, .. } => input,
        }
    }

    /// Where the output goes (after the call, the output).
    pub(super) fn output(&mut self) -> &mut [u8] {
        match &mut self.0 {
            Ends::InPlace(buf) => buf,
            Ends::Between { output, .. } => output,
        }
    }

    /// Both ends, as RustCrypto's cipher traits take them.
    pub(super) fn inout(&mut self) -> Result<InOutBuf<'_, '_, u8>, CryptoError> {
        match &mut self.0 {
            Ends::InPlace(buf) => Ok(InOutBuf::from(&mut **buf)),
            Ends::Between { input, output } => {
                let (len, buf) = (input.len(), output.len());
                InOutBuf::new(input, output)
                    .map_err(|_| CryptoError::LengthExceedsBuffer { len, buf })
            }
        }
    }

    /// Both ends as slices: `None` when the text runs in place.
    #[cfg(feature = "openssl")]
    pub(super) fn ends(&mut self) -> Option<(&[u8], &mut [u8])> {
        match &mut self.0 {
            Ends::InPlace(_) => None,
            Ends::Between { input, output } => Some((input, output)),
        }
    }
}

/// Checks that the buffer a packet runs into from `input` is as long as the input, as every
/// call between two buffers requires.
///
/// # Errors
/// [`CryptoError::LengthExceedsBuffer`].
pub(crate) fn check_same_len(input: &[u8], output: &[u8]) -> Result<(), CryptoError> {
    if input.len() != output.len() {
        return Err(CryptoError::LengthExceedsBuffer {
            len: input.len(),
            buf: output.len(),
        });
    }
    Ok(())
}
