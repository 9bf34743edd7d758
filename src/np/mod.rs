//! NumPy parity: array printing (`print(a)`, `repr(a)`), `np.round`, and NumPy's random streams.

mod print;
mod random;

pub use print::*;
pub use random::*;
