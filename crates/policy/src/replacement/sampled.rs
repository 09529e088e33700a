//! Sampled eviction, shared by Random, Hyperbolic and LHD: a full cache has every slot of
//! its slab in use, so a slot drawn uniformly is a resident block drawn uniformly (no sample
//! array, no order to keep), and the victim is the first of the lowest rank among the slots
//! drawn (Hyperbolic caching, ATC 2017, section 3; LHD, NSDI 2018, section 5; Random draws
//! one slot and ranks nothing).

use rand::distributions::uniform::SampleUniform;
use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// `n` slots drawn uniformly from `0..capacity`, each one `rng.gen_range(0..capacity)` in
/// the integer type of `capacity`: a `u32` bound draws other numbers than a `usize` one
/// from the same generator, so each policy keeps the type its decisions were pinned with.
/// `capacity` must be positive and below `u32::MAX`.
#[inline]
pub(super) fn draws<'a, T>(
    rng: &'a mut Xoshiro256PlusPlus,
    capacity: T,
    n: usize,
) -> impl Iterator<Item = u32> + 'a
where
    T: SampleUniform + PartialOrd + Copy + From<u8> + TryInto<u32> + 'a,
{
    (0..n).map(move |_| rng.gen_range(T::from(0)..capacity).try_into().unwrap_or(u32::MAX))
}

/// One slot drawn as [`draws`] draws each.
#[inline]
pub(super) fn draw<T>(rng: &mut Xoshiro256PlusPlus, capacity: T) -> u32
where
    T: SampleUniform + PartialOrd + Copy + From<u8> + TryInto<u32>,
{
    rng.gen_range(T::from(0)..capacity).try_into().unwrap_or(u32::MAX)
}

/// Of `candidates`, in order, the first whose `rank` is the lowest and below `above`, with
/// its rank; `(None, above)` if none is below it. `rank` is asked once per candidate, in
/// order, so candidates may be drawn lazily.
#[inline]
pub(super) fn first_lowest<S: PartialOrd>(
    candidates: impl IntoIterator<Item = u32>,
    above: S,
    mut rank: impl FnMut(u32) -> S,
) -> (Option<u32>, S) {
    let (mut victim, mut best) = (None, above);
    for i in candidates {
        let r = rank(i);
        if r < best {
            (victim, best) = (Some(i), r);
        }
    }
    (victim, best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn draws_are_gen_range_in_the_bound_s_type() {
        let (mut a, mut b) =
            (Xoshiro256PlusPlus::seed_from_u64(3), Xoshiro256PlusPlus::seed_from_u64(3));
        let got: Vec<u32> = draws(&mut a, 1000usize, 50).collect();
        let want: Vec<u32> = (0..50).map(|_| b.gen_range(0..1000usize) as u32).collect();
        assert_eq!(got, want);
        let got: Vec<u32> = draws(&mut a, 1000u32, 50).collect();
        let want: Vec<u32> = (0..50).map(|_| b.gen_range(0..1000u32)).collect();
        assert_eq!(got, want);
        assert_eq!(draw(&mut a, 77usize), b.gen_range(0..77usize) as u32);
    }

    #[test]
    fn the_first_of_the_lowest_wins() {
        let rank = |i: u32| [5, 3, 9, 3, 4][i as usize];
        assert_eq!(first_lowest(0..5, i32::MAX, rank), (Some(1), 3));
        assert_eq!(first_lowest(0..5, 3, rank), (None, 3));
        assert_eq!(first_lowest(0..0, 1.0, |_| 0.0), (None, 1.0));
    }
}
