import sys
from sim.system import System, Scenario, run_seed
from sim import system as S
from nf_host.harness import read_checker
import sim.loop as L
from nf_host import replication
seed=int(sys.argv[1]); sc=S.__main__ if False else None
from sim.__main__ import scenario
sc=scenario(sys.argv[3:])
sysm=System(seed, sc)
saved=replication.TRANSPORT; replication.TRANSPORT=sysm.net
o=L.run(sysm.run())
flow=int(sys.argv[2])
for d in sysm.switch.edge:
    r=read_checker(d.frame)
    if r and r[0]==flow: print(r, d.slot, d.epoch, d.seq)
