//! NumPy parity: array printing (`print(a)`, `repr(a)`), `np.round`, and NumPy's random streams.

mod dragon4;
mod format;
mod print;
mod random;
mod round;

pub use print::*;
pub use random::*;
pub use round::round;
