//! heads
