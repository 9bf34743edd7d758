//! init
