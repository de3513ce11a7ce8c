"""Memory-safety scenarios of the C simulator (issue 25, item 8), run raw through the harness of
test_sim_raw.py.  Each one is a plain pass in the normal build; under the sanitizer build
(``SIM_SANITIZE=1``, .ci/run's sanitizer step) the bug it guards is an ASan/UBSan abort."""

from __future__ import annotations

from tests.sim.test_sim_raw import harness_dir, sim, sim_build  # noqa: F401  (fixtures)


def test_sync_while_another_thread_destroys_the_stream(sim):  # noqa: F811
    # aclrtSynchronizeStream read the stream's sticky error after its drain had unpinned the stream, which
    # the destroying thread had marked dead: the unpin freed it (heap use-after-free under ASan).
    sim("""
        import time
        init(0)
        rt.cannsimSetDelay(20)
        for _ in range(12):
            smp = Sample(np)
            s = stream()
            ws, ex = smp.phase1()
            w = malloc(ws)
            ok(phase2(w, ws, ex, s))
            done = {}

            def syncer(i):
                ok(rt.aclrtSetDevice(0))
                done["sync%d" % i] = rt.aclrtSynchronizeStream(s)

            def destroyer():
                ok(rt.aclrtSetDevice(0))
                time.sleep(0.01)
                done["destroy"] = rt.aclrtDestroyStream(s)

            ts = [threading.Thread(target=syncer, args=(i,)) for i in range(6)]
            ts.append(threading.Thread(target=destroyer))
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            # a sync that the destroy overtook finds no live stream (107000); else it succeeds
            assert done.pop("destroy") == OK and set(done.values()) <= {OK, RT_PARAM}, done
            assert smp.result() == [36.0, 100.0, 164.0, 228.0]
            ok(rt.aclrtFree(w))
            smp.release()
        rt.cannsimSetDelay(0)
        assert live("stream") == 0
    """)


def test_wrapping_offset_never_reaches_another_buffer(sim):  # noqa: F811
    # A tensor over buffer A whose element offset wraps the address space lands on buffer B: the
    # simulator computed data + offset * itemsize as a pointer (UBSan pointer-overflow) and then found
    # B's memory live.  It must refuse the view instead.
    sim("""
        init(0)
        a, b = malloc(4096), malloc(4096)
        hi, lo = max(a, b), min(a, b)
        off = ((1 << 64) - (hi - lo)) // 4          # hi + off * 4 == lo (mod 2**64)
        assert 0 < off < (1 << 63)
        c = malloc(4096)
        gi = tensor([2, 2, 1, 1, 1], c)
        go = tensor([2, 2, 2, 2, 2], hi, offset=off, storage=[off + 64])
        osz, isz = int_array(2, 2, 2), int_array(2, 2, 1, 1, 1)
        # 2**63 bytes past the data pointer: refused (UBSan: pointer-index overflow in the address sum)
        go2 = tensor([2, 2, 2, 2, 2], lo, offset=1 << 61, storage=[(1 << 61) + 64])   # 2**63 bytes on
        rc, ws, ex = phase1(go2, osz, isz, gi)
        expect(rc, PARAM_INVALID, "gradOut")
        rc, ws, ex = phase1(go, osz, isz, gi)
        msg = expect(rc, PARAM_INVALID, "gradOut")
        assert "address space" in msg, msg
        for t in (gi, go, go2):
            ok(nn.aclDestroyTensor(t))
        for x in (osz, isz):
            ok(nn.aclDestroyIntArray(x))
        ok(rt.aclrtFree(a))
        ok(rt.aclrtFree(b))
        ok(rt.aclrtFree(c))
    """)
