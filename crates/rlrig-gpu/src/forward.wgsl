// Forward pass of both networks for ROWS rows of `xs` (ROWS <= R): hidden layers into
// h1/h2, outputs (actor logits, then the critic's value) into `outs`. Ends with a
// barrier: `outs` is ready for every thread. Lines starting `%ROWS` are written out by
// the host once per row this thread's part computes (rows p, p + SPLIT, ...; see
// ppo.wgsl); each row's sums run in the same order whatever SPLIT is.
fn forward_NAME(tid: u32, pb: u32) {
    let net = net_of(tid);
    let j = tid % H;
    let p = part_of(tid);
    let nb = net_base(pb, net);
    let b1 = params[off_b1(nb) + j];
%ROWS    var z{r} = b1;
    for (var i = 0u; i < OBS; i++) {
        let w = params[nb + i * H + j];
%ROWS        z{r} += w * xs[{r}u * OBS + i];
    }
%ROWS    h1[(net * R + {r}u) * H4 + j / 4u][j % 4u] = tanh_(z{r});
    workgroupBarrier();
    let b2 = params[off_b2(nb) + j];
%ROWS    z{r} = b2;
%K{
        let wb = 4u * {kk} * H + j;
        let w = vec4<f32>(w2(net, nb, wb), w2(net, nb, wb + H), w2(net, nb, wb + 2u * H), w2(net, nb, wb + 3u * H));
%ROWS        z{r} += dot(w, h1[(net * R + {r}u) * H4 + {kk}]);
%K}
%ROWS    h2[(net * R + {r}u) * H4 + j / 4u][j % 4u] = tanh_(z{r});
    workgroupBarrier();
    for (var q = tid; q < ROWS * OUTS; q += WG) {
        let r = q / OUTS;
        let a = q % OUTS;
        // Logits come from the actor (net 1), the value from the critic (net 0).
        let onet = select(1u, 0u, a == ACT);
        let onb = net_base(pb, onet);
        let on = outputs_of(onet);
        let o = select(a, 0u, a == ACT);
        var s = params[off_b3(onb, on) + o];
%K{
            let wb = 4u * {kk} * on + o;
            let w = vec4<f32>(w3(onet, onb, wb), w3(onet, onb, wb + on), w3(onet, onb, wb + 2u * on), w3(onet, onb, wb + 3u * on));
            s += dot(w, h2[(onet * R + r) * H4 + {kk}]);
%K}
        outs[q] = s;
    }
    workgroupBarrier();
}
