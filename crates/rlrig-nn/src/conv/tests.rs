use super::*;
use crate::nn::normal;
use rlrig_env::Purpose;

/// A convolution computed the slow, obvious way, against im2col + gemm.
#[test]
fn conv_matches_a_direct_convolution() {
    let mut rng = Rng::stream(5, Purpose::User, 0);
    for (pad, k, stride) in [
        (0, 3, 1),
        (1, 3, 1),
        (2, 5, 1),
        (0, 2, 2),
        (1, 3, 2),
        (0, 3, 3),
    ] {
        let c = Conv2d::new(0, 2, ConvSpec::new(3, k, stride, pad), 5, 6);
        let params: Vec<f32> = (0..c.end()).map(|_| normal(&mut rng) as f32).collect();
        let batch = 2;
        let x: Vec<f32> = (0..batch * 5 * 6 * 2)
            .map(|_| normal(&mut rng) as f32)
            .collect();
        let (oh, ow) = (c.out_h(), c.out_w());
        let mut out = vec![0.0; batch * oh * ow * 3];
        c.forward(&params, &x, batch, &mut Vec::new(), &mut out);
        for n in 0..batch {
            for oy in 0..oh {
                for ox in 0..ow {
                    for co in 0..3 {
                        let mut s = f64::from(params[c.b + co]);
                        for ky in 0..k {
                            for kx in 0..k {
                                let (iy, ix) = (oy * stride + ky, ox * stride + kx);
                                if iy < pad || ix < pad || iy - pad >= 5 || ix - pad >= 6 {
                                    continue;
                                }
                                for ci in 0..2 {
                                    let xv = x[((n * 5 + iy - pad) * 6 + ix - pad) * 2 + ci];
                                    let wv = params[c.w + ((ky * k + kx) * 2 + ci) * 3 + co];
                                    s += f64::from(xv) * f64::from(wv);
                                }
                            }
                        }
                        let got = out[((n * oh + oy) * ow + ox) * 3 + co];
                        assert!(
                            (f64::from(got) - s).abs() < 1e-4,
                            "pad {pad} k {k} stride {stride}: {got} vs {s}"
                        );
                    }
                }
            }
        }
    }
}

/// A channels-last net on `h x w x planes` inputs is the planes-first net on the
/// transposed inputs: same outputs, same gradients.
#[test]
fn channels_last_input_is_the_transposed_planes_first_input() {
    let first = ConvNet::new(4, 5, 6, 3, 3, 0, 1, &[8], 3, 0);
    let last = first.clone().with_channels_last();
    let mut rng = Rng::stream(8, Purpose::User, 0);
    let mut params = vec![0.0; first.end()];
    first.init(&mut params, std::f32::consts::SQRT_2, 0.5, &mut rng);
    let batch = 2;
    let hwc: Vec<f32> = (0..batch * first.input_dim())
        .map(|_| normal(&mut rng) as f32)
        .collect();
    let mut chw = vec![0.0; hwc.len()];
    for n in 0..batch {
        for c in 0..4 {
            for i in 0..30 {
                chw[(n * 4 + c) * 30 + i] = hwc[(n * 30 + i) * 4 + c];
            }
        }
    }
    let (mut c1, mut c2) = (ConvCache::default(), ConvCache::default());
    let a = first.forward(&params, &chw, batch, &mut c1).to_vec();
    let b = last.forward(&params, &hwc, batch, &mut c2).to_vec();
    assert_eq!(a, b);
    assert!(
        a.iter().any(|&v| v != 0.0),
        "the test needs non-zero outputs"
    );
    let dout = vec![1.0; a.len()];
    let (mut g1, mut g2) = (vec![0.0; params.len()], vec![0.0; params.len()]);
    first.backward(&params, &mut g1, &dout, &mut c1);
    last.backward(&params, &mut g2, &dout, &mut c2);
    assert_eq!(g1, g2);
    // The orthogonal init zeroes biases and scales the output layer by its gain.
    assert!(
        params[first.stem().b..first.stem().end()]
            .iter()
            .all(|&v| v == 0.0)
    );
}

/// The strided towers of the Nature network: output sizes as PyTorch computes them.
#[test]
fn nature_tower_shapes() {
    let net = ConvNet::tower((4, 84, 84), &NATURE, 0, &[512], 7, 0);
    let sides: Vec<(usize, usize)> = net.layers.iter().map(|c| (c.out_h(), c.out_w())).collect();
    assert_eq!(sides, [(20, 20), (9, 9), (7, 7)]);
    assert_eq!(net.head.input_dim(), 3136);
    // 8*8*4*32+32 + 4*4*32*64+64 + 3*3*64*64+64 + 3136*512+512 + 512*7+7
    assert_eq!(
        net.num_params(),
        8_224 + 32_832 + 36_928 + 1_606_144 + 3_591
    );
    // Its passes split into fewer rows a chunk than an MLP's (backend.rs).
    let big = crate::backend::NetLayout {
        total: net.end(),
        nets: vec![net.into()],
        free: 0..0,
    };
    assert_eq!(
        (big.min_chunk_rows(false), big.min_chunk_rows(true)),
        (8, 34)
    );
    let mlp = crate::backend::NetLayout {
        nets: vec![Mlp::new(&[4, 64, 64, 2], 0).into()],
        total: 4 * 64 + 64 + 64 * 64 + 64 + 64 * 2 + 2,
        free: 0..0,
    };
    assert_eq!(
        (mlp.min_chunk_rows(false), mlp.min_chunk_rows(true)),
        (crate::backend::MIN_INFER_CHUNK_ROWS, 64)
    );
}

#[test]
fn backward_matches_finite_differences() {
    // A strided, scaled stack of plain convolutions: the Nature network's shape.
    let net = ConvNet::tower(
        (2, 11, 9),
        &[ConvSpec::new(3, 3, 2, 0), ConvSpec::new(4, 2, 1, 1)],
        0,
        &[5],
        2,
        0,
    )
    .with_scale(0.5);
    check_gradients(&net);
    // Two residual blocks and a padded stem: every path of the backward pass.
    check_gradients(&ConvNet::new(2, 4, 5, 3, 3, 1, 2, &[6], 2, 0));
}

fn check_gradients(net: &ConvNet) {
    let mut rng = Rng::stream(6, Purpose::User, 0);
    let mut params = vec![0.0; net.end()];
    net.init_torch_default(&mut params, &mut rng);
    for p in params.iter_mut() {
        *p += 0.05 * normal(&mut rng) as f32;
    }
    let batch = 3;
    let x: Vec<f32> = (0..batch * net.input_dim())
        .map(|_| normal(&mut rng) as f32)
        .collect();
    let g: Vec<f32> = (0..batch * 2).map(|_| normal(&mut rng) as f32).collect();
    let grads = crate::nn::assert_backward_matches_central_differences(
        &params,
        &g,
        (1e-3, 2e-2),
        |p, cache: &mut ConvCache| net.forward(p, &x, batch, cache).to_vec(),
        |p, grads, cache| net.backward(p, grads, &g, cache),
    );
    // Every layer got a gradient (a dead path would pass the check with zeros).
    for c in net.convs() {
        assert!(
            grads[c.w..c.end()].iter().any(|g| *g != 0.0),
            "conv at {} has no gradient",
            c.w
        );
    }
}
