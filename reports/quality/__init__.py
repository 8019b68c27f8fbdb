"""Quality beside speed: how far one serving configuration's outputs move from a reference's."""
