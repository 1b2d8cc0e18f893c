//! Plane geometry on `f64`: points, the linear objects and circles, and where they meet.

use std::ops::{Add, Div, Mul, Neg, Sub};

/// A point, or a displacement.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Pt {
    pub x: f64,
    pub y: f64,
}

impl Pt {
    pub const fn new(x: f64, y: f64) -> Self {
        Pt { x, y }
    }

    pub fn dot(self, o: Pt) -> f64 {
        self.x * o.x + self.y * o.y
    }

    pub fn cross(self, o: Pt) -> f64 {
        self.x * o.y - self.y * o.x
    }

    pub fn norm(self) -> f64 {
        self.x.hypot(self.y)
    }

    pub fn dist(self, o: Pt) -> f64 {
        (self - o).norm()
    }

    /// Turned a quarter counter-clockwise.
    pub fn perp(self) -> Pt {
        Pt::new(-self.y, self.x)
    }

    pub fn unit(self) -> Pt {
        self / self.norm()
    }

    pub fn is_finite(self) -> bool {
        self.x.is_finite() && self.y.is_finite()
    }

    /// The direction's angle, radians, in (-π, π].
    pub fn angle(self) -> f64 {
        self.y.atan2(self.x)
    }
}

impl Add for Pt {
    type Output = Pt;
    fn add(self, o: Pt) -> Pt {
        Pt::new(self.x + o.x, self.y + o.y)
    }
}

impl Sub for Pt {
    type Output = Pt;
    fn sub(self, o: Pt) -> Pt {
        Pt::new(self.x - o.x, self.y - o.y)
    }
}

impl Mul<f64> for Pt {
    type Output = Pt;
    fn mul(self, k: f64) -> Pt {
        Pt::new(self.x * k, self.y * k)
    }
}

impl Div<f64> for Pt {
    type Output = Pt;
    fn div(self, k: f64) -> Pt {
        Pt::new(self.x / k, self.y / k)
    }
}

impl Neg for Pt {
    type Output = Pt;
    fn neg(self) -> Pt {
        Pt::new(-self.x, -self.y)
    }
}

/// Lengths below this fraction of the figure's size count as zero.
const REL_EPS: f64 = 1e-9;

/// A tolerance for comparing lengths around `scale`.
pub fn eps(scale: f64) -> f64 {
    REL_EPS * scale.abs().max(1.0)
}

/// Whether two points are the same place.
pub fn same_point(a: Pt, b: Pt) -> bool {
    a.dist(b) <= eps(a.norm().max(b.norm()))
}

/// How far a linear object extends along `p + t·d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extent {
    /// Every t.
    Line,
    /// t ≥ 0.
    Ray,
    /// 0 ≤ t ≤ 1.
    Segment,
}

/// A line, ray or segment as `p + t·d`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Linear {
    pub p: Pt,
    pub d: Pt,
    pub extent: Extent,
}

impl Linear {
    pub fn at(&self, t: f64) -> Pt {
        self.p + self.d * t
    }

    /// Whether parameter `t` is on the object (with a little slack at the ends).
    pub fn contains_t(&self, t: f64) -> bool {
        let slack = 1e-9;
        match self.extent {
            Extent::Line => true,
            Extent::Ray => t >= -slack,
            Extent::Segment => (-slack..=1.0 + slack).contains(&t),
        }
    }

    /// The parameter of the point of the supporting line nearest `q`.
    pub fn project(&self, q: Pt) -> f64 {
        (q - self.p).dot(self.d) / self.d.dot(self.d)
    }

    /// The distance from `q` to the object itself (its extent counts).
    pub fn distance_to(&self, q: Pt) -> f64 {
        let t = self.project(q);
        let t = match self.extent {
            Extent::Line => t,
            Extent::Ray => t.max(0.0),
            Extent::Segment => t.clamp(0.0, 1.0),
        };
        self.at(t).dist(q)
    }
}

/// Where two linear objects meet.
#[derive(Debug, Clone, PartialEq)]
pub enum Crossing {
    Point(Pt),
    Parallel,
    Same,
}

/// The crossing of the supporting lines of `a` and `b`, and its parameters on each.
pub fn cross_lines(a: &Linear, b: &Linear) -> (Crossing, f64, f64) {
    let denom = a.d.cross(b.d);
    let scale = a.d.norm() * b.d.norm();
    if denom.abs() <= 1e-12 * scale {
        let offset = (b.p - a.p).cross(a.d).abs() / a.d.norm();
        let size = a.p.norm().max(b.p.norm());
        let kind = if offset <= eps(size) {
            Crossing::Same
        } else {
            Crossing::Parallel
        };
        return (kind, 0.0, 0.0);
    }
    let w = b.p - a.p;
    let t = w.cross(b.d) / denom;
    let s = w.cross(a.d) / denom;
    (Crossing::Point(a.at(t)), t, s)
}

/// The points where the supporting line of `l` meets the circle, along `l`'s direction, with
/// their parameters: none, one (tangent) or two.
pub fn line_circle(l: &Linear, c: Pt, r: f64) -> Vec<(Pt, f64)> {
    let f = l.p - c;
    let a = l.d.dot(l.d);
    let b = 2.0 * f.dot(l.d);
    let k = f.dot(f) - r * r;
    let disc = b * b - 4.0 * a * k;
    let tangent_band = 1e-9 * (b * b).max(4.0 * a * r * r).max(1e-300);
    if disc < -tangent_band {
        return Vec::new();
    }
    if disc.abs() <= tangent_band {
        let t = -b / (2.0 * a);
        return vec![(l.at(t), t)];
    }
    let root = disc.sqrt();
    let (t1, t2) = ((-b - root) / (2.0 * a), (-b + root) / (2.0 * a));
    vec![(l.at(t1), t1), (l.at(t2), t2)]
}

/// Where two circles meet.
#[derive(Debug, Clone, PartialEq)]
pub enum CircleCrossing {
    /// The left one (seen from the first centre towards the second) first.
    Points(Vec<Pt>),
    Same,
}

pub fn circle_circle(c1: Pt, r1: f64, c2: Pt, r2: f64) -> CircleCrossing {
    let d = c1.dist(c2);
    let size = c1.norm().max(c2.norm()).max(r1).max(r2);
    if d <= eps(size) {
        if (r1 - r2).abs() <= eps(size) {
            return CircleCrossing::Same;
        }
        return CircleCrossing::Points(Vec::new());
    }
    let tolerance = eps(size) * 10.0;
    if d > r1 + r2 + tolerance || d < (r1 - r2).abs() - tolerance {
        return CircleCrossing::Points(Vec::new());
    }
    let a = (r1 * r1 - r2 * r2 + d * d) / (2.0 * d);
    let h2 = r1 * r1 - a * a;
    let u = (c2 - c1) / d;
    let m = c1 + u * a;
    if h2 <= (tolerance * size).max(0.0) {
        return CircleCrossing::Points(vec![m]);
    }
    let h = h2.sqrt();
    CircleCrossing::Points(vec![m + u.perp() * h, m - u.perp() * h])
}

/// The centre of the circle through three points, or `None` when they are collinear.
pub fn circumcentre(a: Pt, b: Pt, c: Pt) -> Option<Pt> {
    let (ab, ac) = (b - a, c - a);
    let d = 2.0 * ab.cross(ac);
    if d.abs() <= 1e-9 * ab.norm() * ac.norm() {
        return None;
    }
    let (ab2, ac2) = (ab.dot(ab), ac.dot(ac));
    let centre = Pt::new((ac.y * ab2 - ab.y * ac2) / d, (ab.x * ac2 - ac.x * ab2) / d);
    Some(a + centre)
}

/// Twice the signed area of a polygon (positive counter-clockwise).
pub fn twice_area(vertices: &[Pt]) -> f64 {
    let n = vertices.len();
    (0..n)
        .map(|i| vertices[i].cross(vertices[(i + 1) % n]))
        .sum()
}

/// The signed turn from direction `u` to direction `v`, radians, in (-π, π].
pub fn turn(u: Pt, v: Pt) -> f64 {
    u.cross(v).atan2(u.dot(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Pt, b: Pt) -> bool {
        a.dist(b) < 1e-9
    }

    #[test]
    fn lines_cross_are_parallel_or_the_same() {
        let x_axis = Linear {
            p: Pt::new(0.0, 0.0),
            d: Pt::new(1.0, 0.0),
            extent: Extent::Line,
        };
        let diagonal = Linear {
            p: Pt::new(0.0, -1.0),
            d: Pt::new(1.0, 1.0),
            extent: Extent::Line,
        };
        let (hit, _, _) = cross_lines(&x_axis, &diagonal);
        assert_eq!(hit, Crossing::Point(Pt::new(1.0, 0.0)));
        let shifted = Linear {
            p: Pt::new(0.0, 1.0),
            ..x_axis
        };
        assert_eq!(cross_lines(&x_axis, &shifted).0, Crossing::Parallel);
        let again = Linear {
            p: Pt::new(5.0, 0.0),
            d: Pt::new(-2.0, 0.0),
            extent: Extent::Line,
        };
        assert_eq!(cross_lines(&x_axis, &again).0, Crossing::Same);
    }

    #[test]
    fn circles_meet_in_two_one_or_no_points() {
        let two = circle_circle(Pt::new(0.0, 0.0), 5.0, Pt::new(8.0, 0.0), 5.0);
        let CircleCrossing::Points(points) = two else {
            panic!("points")
        };
        assert!(close(points[0], Pt::new(4.0, 3.0)) && close(points[1], Pt::new(4.0, -3.0)));
        let touching = circle_circle(Pt::new(0.0, 0.0), 1.0, Pt::new(2.0, 0.0), 1.0);
        assert_eq!(touching, CircleCrossing::Points(vec![Pt::new(1.0, 0.0)]));
        let apart = circle_circle(Pt::new(0.0, 0.0), 1.0, Pt::new(3.0, 0.0), 1.0);
        assert_eq!(apart, CircleCrossing::Points(vec![]));
    }

    #[test]
    fn a_circle_passes_through_three_points_unless_collinear() {
        let c = circumcentre(Pt::new(0.0, 0.0), Pt::new(4.0, 0.0), Pt::new(0.0, 3.0));
        assert!(close(c.unwrap(), Pt::new(2.0, 1.5)));
        assert_eq!(
            circumcentre(Pt::new(0.0, 0.0), Pt::new(1.0, 1.0), Pt::new(2.0, 2.0)),
            None
        );
    }

    #[test]
    fn a_line_meets_a_circle_along_its_direction() {
        let l = Linear {
            p: Pt::new(-10.0, 0.0),
            d: Pt::new(1.0, 0.0),
            extent: Extent::Line,
        };
        let hits = line_circle(&l, Pt::new(0.0, 0.0), 2.0);
        assert!(close(hits[0].0, Pt::new(-2.0, 0.0)) && close(hits[1].0, Pt::new(2.0, 0.0)));
        let tangent = Linear {
            p: Pt::new(-10.0, 2.0),
            ..l
        };
        assert_eq!(line_circle(&tangent, Pt::new(0.0, 0.0), 2.0).len(), 1);
    }
}
