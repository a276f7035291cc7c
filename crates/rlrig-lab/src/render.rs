//! Animated GIFs of recorded episodes (`rlrig play`) for the classic-control, MinAtar and
//! Box2D envs, drawn from each step's `Env::render_state` with the reference's geometry.

use std::path::Path;

use plotters::prelude::*;

use crate::LabError;

/// Frames per second Gymnasium's renderers use (`metadata["render_fps"]`).
fn fps(env: &str) -> u32 {
    match env {
        "CartPole-v1" => 50,
        id if id.starts_with("MinAtar/") => 10,
        // Atari: 60 frames/s, four per step.
        "Acrobot-v1" => 15,
        id if id.ends_with("-v5") => 15,
        "LunarLander-v3"
        | "LunarLanderContinuous-v3"
        | "BipedalWalker-v3"
        | "BipedalWalkerHardcore-v3" => 50,
        _ => 30,
    }
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;

fn size(env: &str) -> (u32, u32) {
    match env {
        "Pendulum-v1" => (400, 400),
        id if id.starts_with("MinAtar/") => (400, 430),
        id if id.ends_with("-v5") => (2 * 160, 30 + 2 * 210),
        "Acrobot-v1" => (500, 500),
        _ => (600, 400),
    }
}

fn draw_cartpole(a: &Area<'_>, s: &[f64]) -> Result<(), LabError> {
    let e = LabError::frame::<DrawingAreaErrorKind<_>>;
    let (x, theta) = (s[0], s[2]);
    let scale = 600.0 / 4.8; // world width: twice the x threshold
    let (cx, cy) = ((x * scale + 300.0) as i32, 300);
    a.draw(&PathElement::new(
        vec![(0, cy + 15), (600, cy + 15)],
        BLACK.stroke_width(1),
    ))
    .map_err(e)?;
    a.draw(&Rectangle::new(
        [(cx - 25, cy - 15), (cx + 25, cy + 15)],
        BLACK.filled(),
    ))
    .map_err(e)?;
    let len = scale; // pole length 2 * 0.5 m
    let (px, py) = (
        cx as f64 + len * theta.sin(),
        (cy - 15) as f64 - len * theta.cos(),
    );
    a.draw(&PathElement::new(
        vec![(cx, cy - 15), (px as i32, py as i32)],
        RGBColor(202, 152, 101).stroke_width(10),
    ))
    .map_err(e)?;
    a.draw(&Circle::new(
        (cx, cy - 15),
        5,
        RGBColor(129, 132, 203).filled(),
    ))
    .map_err(e)?;
    Ok(())
}

fn draw_pendulum(a: &Area<'_>, s: &[f64]) -> Result<(), LabError> {
    let e = LabError::frame::<DrawingAreaErrorKind<_>>;
    let (c, l, th) = ((200, 200), 150.0, s[0]);
    let end = ((200.0 + l * th.sin()) as i32, (200.0 - l * th.cos()) as i32);
    a.draw(&PathElement::new(
        vec![c, end],
        RGBColor(204, 77, 77).stroke_width(24),
    ))
    .map_err(e)?;
    a.draw(&Circle::new(end, 12, RGBColor(204, 77, 77).filled()))
        .map_err(e)?;
    a.draw(&Circle::new(c, 6, BLACK.filled())).map_err(e)?;
    Ok(())
}

fn draw_acrobot(a: &Area<'_>, s: &[f64]) -> Result<(), LabError> {
    let e = LabError::frame::<DrawingAreaErrorKind<_>>;
    let (cx, cy, l) = (250.0, 250.0, 100.0);
    let p1 = (cx + l * s[0].sin(), cy + l * s[0].cos());
    let p2 = (
        p1.0 + l * (s[0] + s[1]).sin(),
        p1.1 + l * (s[0] + s[1]).cos(),
    );
    let pt = |p: (f64, f64)| (p.0 as i32, p.1 as i32);
    // The goal: the free end above one link length over the pivot.
    a.draw(&PathElement::new(
        vec![(0, (cy - l) as i32), (500, (cy - l) as i32)],
        BLACK.stroke_width(1),
    ))
    .map_err(e)?;
    for (from, to) in [((cx, cy), p1), (p1, p2)] {
        a.draw(&PathElement::new(
            vec![pt(from), pt(to)],
            RGBColor(0, 204, 204).stroke_width(12),
        ))
        .map_err(e)?;
        a.draw(&Circle::new(pt(from), 6, RGBColor(204, 204, 0).filled()))
            .map_err(e)?;
    }
    Ok(())
}

fn draw_mountain_car(a: &Area<'_>, s: &[f64], goal: f64) -> Result<(), LabError> {
    let e = LabError::frame::<DrawingAreaErrorKind<_>>;
    let scale = 600.0 / 1.8;
    let height = |x: f64| (3.0 * x).sin() * 0.45 + 0.55;
    let to_px = |x: f64| {
        (
            ((x + 1.2) * scale) as i32,
            (380.0 - height(x) * scale * 0.9) as i32,
        )
    };
    let curve: Vec<(i32, i32)> = (0..=180)
        .map(|i| to_px(-1.2 + 1.8 * f64::from(i) / 180.0))
        .collect();
    a.draw(&PathElement::new(curve, BLACK.stroke_width(2)))
        .map_err(e)?;
    let (fx, fy) = to_px(goal);
    a.draw(&PathElement::new(
        vec![(fx, fy), (fx, fy - 40)],
        BLACK.stroke_width(2),
    ))
    .map_err(e)?;
    a.draw(&Polygon::new(
        vec![(fx, fy - 40), (fx + 22, fy - 34), (fx, fy - 28)],
        RGBColor(204, 204, 0).filled(),
    ))
    .map_err(e)?;
    let (px, py) = to_px(s[0]);
    a.draw(&Circle::new((px, py - 10), 10, BLACK.filled()))
        .map_err(e)?;
    Ok(())
}

/// MinAtar Breakout from its state vector `[ball_y, ball_x, ball_dir, pos, strike, last_x,
/// last_y, terminal, last_action, 100 bricks]`: the 10x10 grid, 40 px a cell.
fn draw_breakout(a: &Area<'_>, s: &[f64]) -> Result<(), LabError> {
    let e = LabError::frame::<DrawingAreaErrorKind<_>>;
    let cell = |y: f64, x: f64, color: RGBColor| {
        let (x0, y0) = (x as i32 * 40, 30 + y as i32 * 40);
        Rectangle::new([(x0 + 1, y0 + 1), (x0 + 39, y0 + 39)], color.filled())
    };
    a.draw(&Rectangle::new([(0, 30), (400, 430)], BLACK.filled()))
        .map_err(e)?;
    for i in 0..100 {
        if s[9 + i] != 0.0 {
            a.draw(&cell(
                (i / 10) as f64,
                (i % 10) as f64,
                RGBColor(204, 102, 0),
            ))
            .map_err(e)?;
        }
    }
    a.draw(&cell(s[6], s[5], RGBColor(90, 90, 140)))
        .map_err(e)?;
    a.draw(&cell(s[0], s[1], RGBColor(230, 230, 230)))
        .map_err(e)?;
    a.draw(&cell(9.0, s[3], RGBColor(0, 170, 200))).map_err(e)?;
    Ok(())
}

/// The colour of MinAtar channel `c` of `n`, as the package's `display_state` picks it:
/// seaborn's `color_palette("cubehelix", n)`, i.e. matplotlib's cubehelix map (gamma 1,
/// s 0.5, r -1.5, hue 1) sampled at `(c + 1) / (n + 1)`.
fn cubehelix(c: usize, n: usize) -> RGBColor {
    let x = (c + 1) as f64 / (n + 1) as f64;
    let amp = x * (1.0 - x) / 2.0;
    let phi = 2.0 * std::f64::consts::PI * (0.5 / 3.0 - 1.5 * x);
    let (sin, cos) = phi.sin_cos();
    let ch = |p0: f64, p1: f64| ((x + amp * (p0 * cos + p1 * sin)).clamp(0.0, 1.0) * 255.0) as u8;
    RGBColor(
        ch(-0.14861, 1.78277),
        ch(-0.29227, -0.90649),
        ch(1.97294, 0.0),
    )
}

/// A MinAtar game from its frame (`render_state`: the channel count, then the
/// `10 x 10 x channels` frame): each cell in the colour of its highest set channel, on
/// black, as the package's `display_state` draws it; 40 px a cell.
fn draw_minatar(a: &Area<'_>, s: &[f64]) -> Result<(), LabError> {
    let e = LabError::frame::<DrawingAreaErrorKind<_>>;
    let n = s.first().copied().unwrap_or(0.0) as usize;
    if n == 0 || s.len() != 1 + 100 * n {
        return Err(LabError::Frame(format!(
            "a MinAtar frame is the channel count then 100 x channels values, got {} values",
            s.len()
        )));
    }
    a.draw(&Rectangle::new([(0, 30), (400, 430)], BLACK.filled()))
        .map_err(e)?;
    for i in 0..100 {
        if let Some(c) = (0..n).rev().find(|&c| s[1 + i * n + c] != 0.0) {
            let (x0, y0) = ((i % 10) as i32 * 40, 30 + (i / 10) as i32 * 40);
            a.draw(&Rectangle::new(
                [(x0 + 1, y0 + 1), (x0 + 39, y0 + 39)],
                cubehelix(c, n).filled(),
            ))
            .map_err(e)?;
        }
    }
    Ok(())
}

/// An Atari screen (`Atari::render_state`: height, width, RGB bytes four to a number),
/// each pixel 2 x 2 below a 30-pixel caption band.
fn draw_atari(a: &Area<'_>, s: &[f64]) -> Result<(), LabError> {
    let (h, w) = (
        s.first().copied().unwrap_or(0.0) as usize,
        s.get(1).copied().unwrap_or(0.0) as usize,
    );
    if h == 0 || w == 0 || s.len() != 2 + (h * w * 3).div_ceil(4) {
        return Err(LabError::Frame(format!(
            "an Atari frame is height, width, then height x width x 3 bytes four to a number; got {} values",
            s.len()
        )));
    }
    let bytes = rlrig_env::envs::unpack_bytes(&s[2..], h * w * 3).map_err(LabError::Frame)?;
    for y in 0..h {
        for x in 0..w {
            let p = &bytes[(y * w + x) * 3..][..3];
            let c = RGBColor(p[0], p[1], p[2]);
            for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                a.draw_pixel((2 * x as i32 + dx, 30 + 2 * y as i32 + dy), &c)
                    .map_err(LabError::frame)?;
            }
        }
    }
    Ok(())
}

/// A body-fixed polygon (vertices in world units) at pose (x, y, angle), as pixels of a
/// viewport that starts at world x `scroll` and draws 30 px per unit, y up.
fn placed(pts: &[(f64, f64)], pose: (f64, f64, f64), scroll: f64, height: i32) -> Vec<(i32, i32)> {
    let (s, c) = pose.2.sin_cos();
    pts.iter()
        .map(|&(x, y)| {
            let (wx, wy) = (pose.0 + c * x - s * y, pose.1 + s * x + c * y);
            (((wx - scroll) * 30.0) as i32, height - (wy * 30.0) as i32)
        })
        .collect()
}

fn rect(hw: f64, hh: f64) -> [(f64, f64); 4] {
    [(-hw, -hh), (hw, -hh), (hw, hh), (-hw, hh)]
}

/// Gymnasium's LunarLander drawing: dark sky, white moon with the helipad flags, the lander
/// and its legs (`LunarLander::render_state`).
fn draw_lunar_lander(a: &Area<'_>, s: &[f64]) -> Result<(), LabError> {
    let e = LabError::frame::<DrawingAreaErrorKind<_>>;
    a.fill(&BLACK).map_err(e)?;
    let chunk_x: Vec<f64> = (0..11).map(|i| 20.0 / 10.0 * i as f64).collect();
    let mut moon: Vec<(f64, f64)> = chunk_x
        .iter()
        .zip(&s[..11])
        .map(|(&x, &y)| (x, y))
        .collect();
    moon.extend([(20.0, 0.0), (0.0, 0.0)]);
    a.draw(&Polygon::new(
        placed(&moon, (0.0, 0.0, 0.0), 0.0, 400),
        WHITE.filled(),
    ))
    .map_err(e)?;
    let helipad_y = s[11];
    for x in [chunk_x[4], chunk_x[6]] {
        let pole = placed(
            &[(x, helipad_y), (x, helipad_y + 50.0 / 30.0)],
            (0.0, 0.0, 0.0),
            0.0,
            400,
        );
        a.draw(&PathElement::new(pole.clone(), WHITE.stroke_width(1)))
            .map_err(e)?;
        let (px, py) = pole[1];
        a.draw(&Polygon::new(
            vec![(px, py), (px, py + 10), (px + 25, py + 5)],
            RGBColor(204, 204, 0).filled(),
        ))
        .map_err(e)?;
    }
    let body = |k: usize| (s[12 + 3 * k], s[13 + 3 * k], s[14 + 3 * k]);
    let purple = RGBColor(128, 102, 230);
    for k in [1, 2] {
        a.draw(&Polygon::new(
            placed(&rect(2.0 / 30.0, 8.0 / 30.0), body(k), 0.0, 400),
            purple.filled(),
        ))
        .map_err(e)?;
    }
    let hull: Vec<(f64, f64)> = rlrig_env::envs::lunar_lander::LANDER_POLY
        .iter()
        .map(|&(x, y)| (x / 30.0, y / 30.0))
        .collect();
    a.draw(&Polygon::new(
        placed(&hull, body(0), 0.0, 400),
        purple.filled(),
    ))
    .map_err(e)?;
    Ok(())
}

/// Gymnasium's BipedalWalker drawing, scrolling with the hull: sky, terrain, obstacles,
/// lidar, legs and hull (`BipedalWalker::render_state`).
fn draw_bipedal_walker(a: &Area<'_>, s: &[f64]) -> Result<(), LabError> {
    let e = LabError::frame::<DrawingAreaErrorKind<_>>;
    a.fill(&RGBColor(215, 215, 255)).map_err(e)?;
    let body = |k: usize| (s[3 * k], s[3 * k + 1], s[3 * k + 2]);
    let scroll = s[0] - 600.0 / 30.0 / 5.0;
    let step = 14.0 / 30.0;
    let terrain = &s[25..225];
    let ground = RGBColor(102, 153, 76);
    for i in 0..terrain.len() - 1 {
        let (x0, x1) = (i as f64 * step, (i + 1) as f64 * step);
        if x1 < scroll || x0 > scroll + 20.0 {
            continue;
        }
        let poly = [(x0, terrain[i]), (x1, terrain[i + 1]), (x1, 0.0), (x0, 0.0)];
        a.draw(&Polygon::new(
            placed(&poly, (0.0, 0.0, 0.0), scroll, 400),
            ground.filled(),
        ))
        .map_err(e)?;
    }
    for q in s[225..].chunks_exact(8) {
        let poly: Vec<(f64, f64)> = q.chunks_exact(2).map(|p| (p[0], p[1])).collect();
        a.draw(&Polygon::new(
            placed(&poly, (0.0, 0.0, 0.0), scroll, 400),
            RGBColor(153, 153, 153).filled(),
        ))
        .map_err(e)?;
    }
    let (hx, hy, _) = body(0);
    for (i, &f) in s[15..25].iter().enumerate() {
        let t = 1.5 * i as f64 / 10.0;
        let end = (
            hx + t.sin() * 160.0 / 30.0 * f,
            hy - t.cos() * 160.0 / 30.0 * f,
        );
        let ray = placed(&[(hx, hy), end], (0.0, 0.0, 0.0), scroll, 400);
        a.draw(&PathElement::new(ray, RED.stroke_width(1)))
            .map_err(e)?;
    }
    let (w, h) = (8.0 / 30.0, 34.0 / 30.0);
    for (k, shade) in [(1, 178u8), (2, 178), (3, 128), (4, 128)] {
        let half_w = if k % 2 == 1 { w / 2.0 } else { 0.8 * w / 2.0 };
        let color = RGBColor(shade, shade / 2, shade);
        a.draw(&Polygon::new(
            placed(&rect(half_w, h / 2.0), body(k), scroll, 400),
            color.filled(),
        ))
        .map_err(e)?;
    }
    let hull: Vec<(f64, f64)> = [
        (-30.0, 9.0),
        (6.0, 9.0),
        (34.0, 1.0),
        (34.0, -8.0),
        (-30.0, -8.0),
    ]
    .iter()
    .map(|&(x, y)| (x / 30.0, y / 30.0))
    .collect();
    a.draw(&Polygon::new(
        placed(&hull, body(0), scroll, 400),
        RGBColor(127, 51, 229).filled(),
    ))
    .map_err(e)?;
    Ok(())
}

type Draw = fn(&Area<'_>, &[f64]) -> Result<(), LabError>;

/// The function that draws a render state of `env`.
fn drawer(env: &str) -> Result<Draw, LabError> {
    Ok(match env {
        "CartPole-v1" => draw_cartpole,
        "Pendulum-v1" => draw_pendulum,
        "Acrobot-v1" => draw_acrobot,
        "MountainCar-v0" => |a, s| draw_mountain_car(a, s, 0.5),
        "MountainCarContinuous-v0" => |a, s| draw_mountain_car(a, s, 0.45),
        "MinAtar/Breakout-v1" => draw_breakout,
        id if id.starts_with("MinAtar/") => draw_minatar,
        "LunarLander-v3" | "LunarLanderContinuous-v3" => draw_lunar_lander,
        "BipedalWalker-v3" | "BipedalWalkerHardcore-v3" => draw_bipedal_walker,
        id if id.ends_with("-v5") => draw_atari,
        other => return Err(LabError::Frame(format!("no renderer for {other}"))),
    })
}

/// One frame of `env` in the render state `state` (`Env::render_state`), as
/// `(height, width, RGB bytes row-major)`: Gymnasium's `render_mode="rgb_array"`.
pub fn frame(env: &str, state: &[f64]) -> Result<(usize, usize, Vec<u8>), LabError> {
    let draw = drawer(env)?;
    let (w, h) = size(env);
    let mut buf = vec![0u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(LabError::frame)?;
        draw(&root, state)?;
        root.present().map_err(LabError::frame)?;
    }
    Ok((h as usize, w as usize, buf))
}

/// Writes the episodes (each a list of internal states) as one animated GIF, with the
/// episode, step and return so far in the corner. Long episodes are subsampled to at
/// most `max_frames` frames each.
pub fn episodes_gif(
    path: &Path,
    env: &str,
    episodes: &[(Vec<Vec<f64>>, Vec<f64>)],
    max_frames: usize,
) -> Result<(), LabError> {
    crate::plot::register_font();
    let draw = drawer(env)?;
    let longest = episodes.iter().map(|(s, _)| s.len()).max().unwrap_or(1);
    let stride = longest.div_ceil(max_frames.max(1)).max(1);
    let delay = (1000 * stride as u32 / fps(env)).max(20);
    let root = BitMapBackend::gif(path, size(env), delay)
        .map_err(|e| LabError::Plot {
            path: path.to_path_buf(),
            why: e.to_string(),
        })?
        .into_drawing_area();
    // LunarLander's sky is black, as in Gymnasium.
    let ink = if env.starts_with("LunarLander") {
        WHITE
    } else {
        BLACK
    };
    let font = ("sans-serif", 16).into_font().color(&ink);
    for (ep, (states, returns)) in episodes.iter().enumerate() {
        for (t, s) in states.iter().enumerate().step_by(stride) {
            root.fill(&WHITE).map_err(LabError::frame)?;
            draw(&root, s)?;
            let label = format!(
                "{env}  episode {}  step {t}  return {:.1}",
                ep + 1,
                returns[t]
            );
            root.draw(&Text::new(label, (8, 8), font.clone()))
                .map_err(LabError::frame)?;
            root.present().map_err(|e| LabError::Plot {
                path: path.to_path_buf(),
                why: e.to_string(),
            })?;
        }
    }
    Ok(())
}
